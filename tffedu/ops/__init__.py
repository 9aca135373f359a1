"""Operator implementations, one module per backend (cpu: chapter 07; cuda: chapters 10-12)."""
