"""C-level helpers for the driver and the backends: reading and writing through the pointers the
shim passes, the structs the driver decodes itself, and libc's memory functions (called with
the GIL released)."""

from __future__ import annotations

import cffi

ffi = cffi.FFI()
ffi.cdef("""
typedef struct {
    size_t srcXInBytes, srcY; int srcMemoryType; const void *srcHost; unsigned long long srcDevice;
    void *srcArray; size_t srcPitch;
    size_t dstXInBytes, dstY; int dstMemoryType; void *dstHost; unsigned long long dstDevice;
    void *dstArray; size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD; int srcMemoryType; const void *srcHost;
    unsigned long long srcDevice; void *srcArray; void *reserved0; size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD; int dstMemoryType; void *dstHost;
    unsigned long long dstDevice; void *dstArray; void *reserved1; size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
typedef struct { size_t Width, Height; int Format; unsigned int NumChannels; } CUDA_ARRAY_DESCRIPTOR;
typedef struct { size_t Width, Height, Depth; int Format; unsigned int NumChannels, Flags; } CUDA_ARRAY3D_DESCRIPTOR;
typedef struct {
    int resType;
    union {
        struct { void *hArray; } array;
        struct { void *hMipmappedArray; } mipmap;
        struct { unsigned long long devPtr; int format; unsigned int numChannels; size_t sizeInBytes; } linear;
        struct { unsigned long long devPtr; int format; unsigned int numChannels; size_t width, height, pitchInBytes; } pitch2D;
        struct { int reserved[32]; } reserved;
    } res;
    unsigned int flags;
} CUDA_RESOURCE_DESC;
typedef struct {
    int addressMode[3]; int filterMode; unsigned int flags, maxAnisotropy; int mipmapFilterMode;
    float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp; float borderColor[4]; int reserved[12];
} CUDA_TEXTURE_DESC;
typedef struct { int id; char pad[4]; char value[64]; } CUlaunchAttribute;
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream; CUlaunchAttribute *attrs; unsigned int numAttrs;
} CUlaunchConfig;
void *memmove(void *dest, const void *src, size_t n);
void *memset(void *s, int c, size_t n);
int posix_memalign(void **memptr, size_t alignment, size_t size);
void free(void *ptr);
void *malloc(size_t size);
void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);
int munmap(void *addr, size_t length);
int madvise(void *addr, size_t length, int advice);
""")
libc = ffi.dlopen(None)


def addr(p) -> int:
    """The address a pointer or handle argument holds (0 for NULL)."""
    return int(ffi.cast("uintptr_t", p))


def store(p, value) -> None:
    """*p = value, for an output pointer argument; a NULL output pointer is a caller error
    the entry point checks first with `require`."""
    p[0] = value


def store_ptr(p, value: int) -> None:
    p[0] = ffi.cast("void *", value)


def cstr(p) -> str:
    return ffi.string(ffi.cast("char *", p)).decode("utf-8", "replace")


def read_bytes(address: int, size: int) -> bytes:
    return ffi.buffer(ffi.cast("char *", address), size)[:]


def memmove(dst: int, src: int, size: int) -> None:
    if size:
        libc.memmove(ffi.cast("void *", dst), ffi.cast("void *", src), size)


def memset(dst: int, byte: int, size: int) -> None:
    if size:
        libc.memset(ffi.cast("void *", dst), byte, size)
