"""The hostile-input suite: seeded inputs that try to crash, hang or exhaust the driver (mutated
PTX and fatbins, decompression bombs, deep nesting, huge declarations), each loaded through
the real driver entry points in a child process under a memory and CPU-time ceiling
(docs/hostile.md). `cases` makes the inputs, `runner` runs and classifies them."""
