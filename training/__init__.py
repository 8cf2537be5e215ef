"""Rollout side of the T1 trainer: policy, engines, agent harness, TITO assembly and R3 replay.

Heavy dependencies (torch, transformers, tokenizers, megatron-core, sglang) are imported by the
submodules that need them, never here, so `import training` stays cheap.
"""
