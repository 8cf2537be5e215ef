"""Train-inference log-probability gap over real multi-turn rollouts, as in the paper's table.

Rollouts: the warm-started tiny Qwen3-MoE policy, served by the local SGLang-protocol engine
(bfloat16, eager attention), drives the TITO harness over seed tasks in the real local sandbox;
each trial is scored by its held-out verifier. The trainer is the same checkpoint in float32 with
SDPA attention. For every loss position we compare the trainer's log-probability with the one the
sampler reported, under four configurations:

- neither:  the trainer re-tokenizes the harness's re-rendered chat history (a text pipeline) and
            routes with its own top-k; sampler logprobs are attached only where the re-encoded ids
            line up with the sampled ones, and loss positions that do not are counted as drift.
- TITO:     the trainer consumes the assembled stream of sampled ids; its own routing.
- R3:       the re-tokenized stream, replaying the sampler's routing where ids line up.
- TITO+R3:  the sampled stream with the sampler's routing replayed (missing rows: live top-k).

Run:  .venv/bin/python benchmarks/train_inference_gap.py [--tasks N] [--max-turns T]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.provenance import with_environment  # noqa: E402

CONFIGS = ("neither", "TITO only", "R3 only", "TITO+R3")


@dataclass
class Tally:
    """Pooled over samples: token-weighted gap, drift and position counts for one config."""

    abs_gap_sum: float = 0.0
    gap_positions: int = 0
    loss_positions: int = 0
    loss_drifted: int = 0
    aligned: int = 0
    retokenized: int = 0
    placeholder: int = 0
    per_sample_gap: list[float] = field(default_factory=list)

    def add(self, trainer, sampler, sample, report) -> None:
        ok = sample.loss_mask & np.isfinite(trainer) & np.isfinite(sampler)
        diff = np.abs(trainer[ok] - sampler[ok])
        self.abs_gap_sum += float(diff.sum())
        self.gap_positions += int(ok.sum())
        if ok.any():
            self.per_sample_gap.append(float(diff.mean()))
        self.loss_positions += report.loss_positions
        self.loss_drifted += report.loss_drifted
        self.aligned += report.aligned
        self.retokenized += report.retokenized
        self.placeholder += report.placeholder

    @property
    def gap(self) -> float:
        return self.abs_gap_sum / self.gap_positions if self.gap_positions else float("nan")

    @property
    def drift(self) -> float:
        return self.loss_drifted / self.loss_positions if self.loss_positions else 0.0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def routing_agreement(model, sample) -> float:
    """Share of (position, layer) where the trainer's live top-k set equals the sampler's."""
    import torch

    from training.r3 import capture_routing

    with torch.no_grad(), capture_routing(model) as cap:
        model(input_ids=torch.as_tensor(sample.token_ids)[None], use_cache=False)
    live = np.sort(cap.rows().numpy(), axis=-1)
    rec = np.sort(sample.routed_experts, axis=-1)
    have = (sample.routed_experts >= 0).all(axis=-1)  # (n, L)
    same = (live == rec).all(axis=-1)
    return float(same[have].mean()) if have.any() else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tasks", type=int, default=0, help="seed tasks to use (0 = all)")
    ap.add_argument("--rollouts", type=int, default=1, help="rollouts per task")
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=0.7, help="sampler and trainer")
    ap.add_argument("--observation-role", choices=("user", "tool"), default="user")
    ap.add_argument("--backend", default="local", help="sandbox backend for run_trial")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the raw numbers here")
    ap.add_argument(
        "--checkpoint", type=Path, help="local checkpoint dir (default: the warm-started policy)"
    )
    args = ap.parse_args(argv)

    import torch

    from sandbox.local import local_backend_problem
    from tasks.corpus import load_seeds
    from training.chat_format import IM_END
    from training.chat_tokenizer import load_chat_tokenizer
    from training.engine_local import LocalEngine
    from training.engine_protocol import EngineClient
    from training.harness import HarnessConfig, PolicyAgent, rendered_history, rollout_trial
    from training.logprobs import stream_logprobs
    from training.policy import load_policy
    from training.tito import assemble_trial, audit_sample, retokenized_sample
    from training.warm_start import warm_started_policy

    if args.backend == "local" and (problem := local_backend_problem()) is not None:
        print(f"local sandbox unavailable: {problem}", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    t0 = time.monotonic()
    ckpt = args.checkpoint or warm_started_policy(log=True)
    tok = load_chat_tokenizer(ckpt)
    im_end = tok.convert_tokens_to_ids(IM_END)
    trainer = load_policy(ckpt, dtype=torch.float32, attn="sdpa")
    cfg = trainer.config
    layers, top_k = cfg.num_hidden_layers, cfg.num_experts_per_tok
    tasks = sorted(load_seeds(), key=lambda t: t.id)
    if args.tasks:
        tasks = tasks[: args.tasks]
    tallies = {c: Tally() for c in CONFIGS}
    cases: dict[str, int] = {}
    rows: list[dict] = []
    agreement: list[float] = []
    with LocalEngine(ckpt, dtype=torch.bfloat16, attn="eager", seed=args.seed) as engine:
        client = EngineClient(engine.base_url, num_layers=layers, top_k=top_k)
        harness = HarnessConfig(
            max_turns=args.max_turns,
            max_new_tokens=args.max_new_tokens,
            observation_role=args.observation_role,
            temperature=args.temperature,
            seed=args.seed,
        )
        agent = PolicyAgent(client, tok, harness)
        for task in tasks:
            for r in range(args.rollouts):
                agent.config = harness.model_copy(update={"seed": args.seed + 1000 * r})
                ro = rollout_trial(task, agent, backend=args.backend)
                traj = ro.trajectory
                if not traj.turns:
                    print(f"{task.id}: no turns ({traj.stop}: {traj.detail})", flush=True)
                    continue
                tito = assemble_trial(traj.turns, im_end_id=im_end, num_layers=layers, top_k=top_k)
                ids, mask = rendered_history(tok, traj.messages)
                neither = retokenized_sample(tito, ids, mask)
                rep_tito = audit_sample(tito, traj.turns)
                rep_neither = audit_sample(neither)
                if rep_tito.span_mismatches:
                    raise RuntimeError(f"{task.id}: auditor found misplaced sampled spans")
                for k, v in traj.boundary_counts().items():
                    cases[k] = cases.get(k, 0) + v
                runs = {
                    "neither": (neither, rep_neither, None),
                    "TITO only": (tito, rep_tito, None),
                    "R3 only": (neither, rep_neither, neither.routed_experts),
                    "TITO+R3": (tito, rep_tito, tito.routed_experts),
                }
                row = {
                    "task": task.id,
                    "rollout": r,
                    "turns": len(traj.turns),
                    "stop": traj.stop,
                    "commands": traj.commands,
                    "malformed": traj.malformed_tool_calls,
                    "passed": ro.trial.passed,
                    "total": ro.trial.total,
                    "failure_mode": str(ro.trial.failure_mode),
                    "stream_tokens": len(tito),
                    "retokenized_tokens": len(neither),
                }
                for name, (sample, report, routing) in runs.items():
                    lp, _ = stream_logprobs(
                        trainer,
                        sample.token_ids,
                        routing=routing,
                        policy="live",
                        temperature=args.temperature,
                    )
                    tallies[name].add(lp.numpy(), sample.sampler_logprobs, sample, report)
                    row[name] = (
                        tallies[name].per_sample_gap[-1] if tallies[name].per_sample_gap else None
                    )
                agreement.append(routing_agreement(trainer, tito))
                rows.append(row)
                print(
                    f"{task.id} r{r}: {len(traj.turns)} turns ({traj.stop}), "
                    f"{traj.commands} commands, verifier {ro.trial.passed}/{ro.trial.total}, "
                    f"{len(tito)} tokens, gap TITO+R3 {_fmt(row['TITO+R3'])} "
                    f"neither {_fmt(row['neither'])}",
                    flush=True,
                )
        client.close()
    elapsed = time.monotonic() - t0
    lines = [
        "| configuration | mean abs logp gap | loss positions compared | drift rate (loss) "
        "| aligned | re-tokenized | placeholder |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in CONFIGS:
        t = tallies[name]
        lines.append(
            f"| {name} | {t.gap:.4f} | {t.gap_positions} / {t.loss_positions} | "
            f"{t.drift:.4f} ({t.loss_drifted}) | {t.aligned} | {t.retokenized} | {t.placeholder} |"
        )
    print()
    print("\n".join(lines))
    print()
    print(
        f"rollouts: {len(rows)} over {len(tasks)} seed tasks, "
        f"{sum(r['turns'] for r in rows)} turns, "
        f"{sum(r['commands'] for r in rows)} commands run in the sandbox, "
        f"{sum(r['malformed'] for r in rows)} malformed tool calls"
    )
    print(f"TITO boundary cases (harness): {cases}")
    print(
        f"sampler/trainer routing agreement without R3 (position x layer): "
        f"{np.nanmean(agreement):.4f}"
    )
    print(
        f"verifier: {sum(r['passed'] for r in rows)} / {sum(r['total'] for r in rows)} "
        f"assertions passed"
    )
    print(f"elapsed {elapsed:.0f}s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "table": {
                        n: {
                            "gap": tallies[n].gap,
                            "drift": tallies[n].drift,
                            "gap_positions": tallies[n].gap_positions,
                            "loss_positions": tallies[n].loss_positions,
                        }
                        for n in CONFIGS
                    },
                    "cases": cases,
                    "rollouts": rows,
                    "environment": with_environment({})["environment"],
                    "routing_agreement": float(np.nanmean(agreement)),
                },
                indent=2,
            )
        )
    tito_drift = tallies["TITO only"].drift + tallies["TITO+R3"].drift
    if tito_drift != 0.0:
        print("FAIL: TITO streams drifted in the loss region", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
