"""zluda-py: a CUDA driver that JIT-translates PTX for hardware NVIDIA does not make."""

__version__ = "0.1.0"
