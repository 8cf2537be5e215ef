#!/bin/bash
# Read the pickle's opcodes (never load it): the callables it imports and the strings it
# passes them are the payload.
python3 - <<'PY'
import json, pickletools
data = open("/tmp/suspicious_session.pkl", "rb").read()
globals_, strings = [], []
for op, arg, _ in pickletools.genops(data):
    if op.name in ("GLOBAL", "INST"):
        globals_.append(str(arg).replace(" ", "."))
    elif op.name == "STACK_GLOBAL":
        globals_.append(".".join(strings[-2:]))
    elif isinstance(arg, str):
        strings.append(arg)
calls = ", ".join(dict.fromkeys(globals_)) or "no callable"
args = [s for s in strings if s not in " ".join(globals_)]
payload = f"calls {calls} with {args[:4]}"
text = " ".join(args).lower()
if any(w in text for w in ("nc ", "/bin/sh", "bash -i", "socket", "reverse", "4444")):
    objective = "open a remote shell to the attacker (remote code execution)"
elif any(w in text for w in ("passwd", "shadow", "curl", "wget", "ssh")):
    objective = "steal credentials or data from the server"
else:
    objective = "execute attacker-controlled code on the server when the session is loaded"
risky = any(g.split(".")[0] in ("os", "posix", "subprocess", "builtins", "__builtin__", "nt") for g in globals_)
json.dump({"malicious_payload": payload, "attack_objective": objective,
           "risk_level": "CRITICAL" if risky else "HIGH"}, open("/tmp/attack_analysis.json", "w"), indent=2)
PY
