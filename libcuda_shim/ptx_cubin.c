/* Writing and reading the PTX cubin (ptx_cubin.h). */
#define _GNU_SOURCE
#include "ptx_cubin.h"

#include <elf.h>
#include <stdint.h>
#include <string.h>

#define ZL_ELFOSABI_CUDA 0x41
#define ZL_EM_CUDA 190
/* .shstrtab's text, and where each name starts in it */
static const char names[] = "\0.shstrtab\0.zluda.ptx\0.zluda.image";
enum { NAME_SHSTRTAB = 1, NAME_PTX = 11, NAME_IMAGE = 22 };

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* a PTX part is stored with its NUL: readers (and the driver's pointer loads) want C text */
static size_t stored_size(const zl_part *p) { return p->size + (p->kind == ZL_PART_PTX); }

size_t zl_ptx_cubin(const zl_part *parts, size_t n, unsigned sm, void *out) {
    size_t pos = sizeof(Elf64_Ehdr) + align8(sizeof names);
    size_t shnum = n + 2;
    for (size_t i = 0; i < n; i++) pos += align8(stored_size(&parts[i]));
    size_t total = pos + shnum * sizeof(Elf64_Shdr);
    if (!out) return total;

    unsigned char *base = out;
    memset(base, 0, total);
    Elf64_Ehdr *eh = out;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_ident[EI_OSABI] = ZL_ELFOSABI_CUDA;
    eh->e_type = ET_EXEC;
    eh->e_machine = ZL_EM_CUDA;
    eh->e_version = EV_CURRENT;
    eh->e_flags = (sm & 0xff) << 8;
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_shentsize = sizeof(Elf64_Shdr);
    eh->e_shnum = (Elf64_Half)shnum;
    eh->e_shstrndx = 1;
    eh->e_shoff = pos;

    Elf64_Shdr *sh = (Elf64_Shdr *)(base + pos);
    size_t off = sizeof(Elf64_Ehdr);
    memcpy(base + off, names, sizeof names);
    sh[1] = (Elf64_Shdr){.sh_name = NAME_SHSTRTAB, .sh_type = SHT_STRTAB, .sh_offset = off,
                         .sh_size = sizeof names, .sh_addralign = 1};
    off += align8(sizeof names);
    for (size_t i = 0; i < n; i++) {
        memcpy(base + off, parts[i].data, parts[i].size);  /* a PTX part's NUL is the memset's */
        sh[i + 2] = (Elf64_Shdr){.sh_name = parts[i].kind == ZL_PART_PTX ? NAME_PTX : NAME_IMAGE,
                                 .sh_type = SHT_PROGBITS, .sh_offset = off,
                                 .sh_size = stored_size(&parts[i]), .sh_addralign = 8};
        off += align8(stored_size(&parts[i]));
    }
    return total;
}

int zl_ptx_cubin_parts(const void *data, size_t size, zl_part *parts, size_t max, size_t *n) {
    const unsigned char *base = data;
    const Elf64_Ehdr *eh = data;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_machine != ZL_EM_CUDA || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shstrndx != 1 ||
        eh->e_shnum < 2 || eh->e_shoff > size || (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
        return -1;
    Elf64_Shdr sh[1];
    memcpy(sh, base + eh->e_shoff + sizeof(Elf64_Shdr), sizeof sh);
    if (sh->sh_offset > size || size - sh->sh_offset < sizeof names || memcmp(base + sh->sh_offset, names, sizeof names))
        return -1;  /* another tool's cubin: its string table is not ours */
    *n = 0;
    for (size_t i = 2; i < eh->e_shnum; i++) {
        memcpy(sh, base + eh->e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
        if (sh->sh_name != NAME_PTX && sh->sh_name != NAME_IMAGE) continue;
        if (sh->sh_offset > size || sh->sh_size > size - sh->sh_offset) return -1;
        int ptx = sh->sh_name == NAME_PTX;
        if (ptx && (sh->sh_size == 0 || base[sh->sh_offset + sh->sh_size - 1])) return -1;
        if (*n < max)
            parts[*n] = (zl_part){ptx ? ZL_PART_PTX : ZL_PART_IMAGE, base + sh->sh_offset, sh->sh_size - ptx};
        ++*n;
    }
    return 0;
}

int zl_is_ptx_cubin(const void *data, size_t size) {
    size_t n;
    return zl_ptx_cubin_parts(data, size, NULL, 0, &n) == 0;
}

unsigned zl_ptx_target(const char *ptx, size_t size) {
    static const char directive[] = ".target";
    for (const char *p = ptx, *end = ptx + size; (p = memmem(p, end - p, directive, sizeof directive - 1)); p++) {
        const char *q = p + sizeof directive - 1;
        while (q < end && (*q == ' ' || *q == '\t')) q++;
        if (end - q <= 3 || memcmp(q, "sm_", 3)) continue;
        unsigned sm = 0;
        for (q += 3; q < end && *q >= '0' && *q <= '9'; q++) sm = sm * 10 + (unsigned)(*q - '0');
        return sm;
    }
    return 0;
}
