"""The trainer's log-probabilities without the whole (B, n, V) logits: chunked scores equal the
full log-softmax (values, entropy and gradients), and the numerics settings resolve as
documented (CPU: float32; bf16 keeps float32 masters and bf16 frozen copies)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from training.logprobs import batch_logprobs, batch_scores, token_logprobs  # noqa: E402
from training.numerics import resolve_numerics  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def model(tiny_config):
    from training.policy import build_policy

    m = build_policy(tiny_config)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("gate.weight"):
                p.normal_(0, 0.5)  # routers that route (a zero router ties every expert)
    return m


def test_chunked_scores_equal_the_full_log_softmax(model):
    """Regression guard for the memory fix: scores of 2 right-padded streams computed 5
    positions at a time (checkpointed under autograd) equal the full (B, n, V) computation,
    for the logprobs, the entropy and the gradient of a loss over them."""
    g = torch.Generator().manual_seed(0)
    streams = [torch.randint(0, 1024, (23,), generator=g).numpy(),
               torch.randint(0, 1024, (17,), generator=g).numpy()]  # fmt: skip
    full = []
    for s in streams:
        ids = torch.as_tensor(s)
        logits = model(input_ids=ids[None], use_cache=False).logits[0] / 0.7
        full.append(token_logprobs(logits, ids))
        p = torch.softmax(logits[:-1].float(), -1)
        full_ent = -(p * torch.log(p)).sum(-1)
        if len(full) == 1:
            ent_want = full_ent
    loss_full = sum(f[1:].sum() for f in full)
    grads_full = torch.autograd.grad(loss_full, [model.model.embed_tokens.weight])[0]

    logp, ent = batch_scores(
        model, streams, temperature=0.7, grad=True, chunk_tokens=5, entropy=True
    )
    assert logp.shape == (2, 23) and torch.isnan(logp[1, 17:]).all()
    assert torch.isnan(logp[:, 0]).all()
    for i, f in enumerate(full):
        assert torch.allclose(logp[i, 1 : len(f)], f[1:].detach(), atol=1e-5)
    assert torch.allclose(ent[0, 1:], ent_want.detach(), atol=1e-4)
    loss = torch.nansum(logp)
    grads = torch.autograd.grad(loss, [model.model.embed_tokens.weight])[0]
    assert torch.allclose(grads, grads_full, atol=1e-4)
    one = batch_logprobs(model, streams, temperature=0.7, chunk_tokens=10_000)
    assert np.allclose(one.numpy(), logp.detach().numpy(), atol=1e-5, equal_nan=True)


def test_numerics_settings():
    cpu = resolve_numerics("auto", "auto")
    if not torch.cuda.is_available():
        assert cpu.device.type == "cpu" and cpu.precision == "fp32"
        assert cpu.frozen_dtype == torch.float32
        with pytest.raises(ValueError, match="no CUDA"):
            resolve_numerics("cuda", "auto")
    bf16 = resolve_numerics("cpu", "bf16")
    assert bf16.frozen_dtype == torch.bfloat16
    lin = torch.nn.Linear(4, 4)
    with bf16.autocast():
        assert lin(torch.ones(1, 4)).dtype == torch.bfloat16
    assert lin.weight.dtype == torch.float32  # master weights untouched
    with pytest.raises(ValueError, match="precision"):
        resolve_numerics("cpu", "fp16")  # type: ignore[arg-type]
