"""Audit and T1 selection: a weighted rubric, an executable judge (always on, offline), an
optional LLM judge, the five-stage selection, pools, the per-epoch permutation, pre-flight and
reports. See docs/audit.md."""
