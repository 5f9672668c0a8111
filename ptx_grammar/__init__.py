"""Data package: the PTX ISA syntax (instructions.txt, directives.txt); see README.md."""
