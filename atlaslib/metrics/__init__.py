"""Metrics: one function per metric (``classification``, ``spans``) and bootstrap resampling."""
