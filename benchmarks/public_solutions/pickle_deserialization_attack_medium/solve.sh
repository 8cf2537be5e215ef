#!/bin/bash
# Read the pickle's opcodes (never load it): the callables it imports and the strings it
# passes them are the payload. A file that is no pickle stream (the source of the class
# that would build one) is read as text: the same callables and command strings.
python3 - <<'PY'
import json, pickletools, re
data = open("/tmp/suspicious_session.pkl", "rb").read()
globals_, strings = [], []
try:
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            globals_.append(str(arg).replace(" ", "."))
        elif op.name == "STACK_GLOBAL":
            globals_.append(".".join(strings[-2:]))
        elif isinstance(arg, str):
            strings.append(arg)
except Exception:
    text = data.decode("utf-8", "replace")
    globals_ = re.findall(r"\b((?:os|subprocess|posix|builtins)\.\w+)", text)
    strings = [s for s in re.findall(r"([\"'])((?:(?!\1).){6,})\1", text) for s in [s[1]]]
calls = ", ".join(dict.fromkeys(globals_)) or "no callable"
args = [s for s in strings if s not in " ".join(globals_)]
shell = [a for a in args if re.search(r"\b(bash|sh|nc|curl|wget|python3?)\b", a)]
payload = f"calls {calls} with {args[:4]}"
if shell:
    payload = f"executes the shell command {shell[0]!r} through {calls}"
text = " ".join(args).lower()
if any(w in text for w in ("nc ", "/bin/sh", "bash -i", "/dev/tcp", "socket", "reverse", "4444")):
    objective = "open a remote shell to the attacker (remote code execution)"
elif any(w in text for w in ("passwd", "shadow", "curl", "wget", "ssh")):
    objective = "steal credentials or data from the server"
else:
    objective = "execute attacker-controlled code on the server when the session is loaded"
risky = any(g.split(".")[0] in ("os", "posix", "subprocess", "builtins", "__builtin__", "nt") for g in globals_)
json.dump({"malicious_payload": payload, "attack_objective": objective,
           "risk_level": "CRITICAL" if risky else "HIGH"}, open("/tmp/attack_analysis.json", "w"), indent=2)
PY
