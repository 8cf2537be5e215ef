#!/bin/bash
# Check every file slapd.conf references (TLS material, schema includes, database
# directory) for existence/readability/permissions and rank problems by how often the
# slapd log reports errors about that path.  Nothing is modified.
cat > /tmp/ldap_diag.py <<'PY'
import glob
import os
import re
import stat

CONF = "/etc/ldap/slapd.conf"
logs = ""
for path in sorted(glob.glob("/var/log/slapd/*")):
    try:
        logs += open(path, errors="replace").read()
    except OSError:
        pass

refs = []  # (directive, path)
for line in open(CONF, errors="replace"):
    s = line.split("#", 1)[0].strip()
    parts = s.split(None, 1)
    if len(parts) != 2:
        continue
    key, val = parts[0], parts[1].strip().strip('"')
    if key in ("TLSCertificateFile", "TLSCertificateKeyFile", "TLSCACertificateFile",
               "TLSCACertificatePath", "include", "directory", "TLSDHParamFile"):
        refs.append((key, val))

ROLE = {
    "TLSCertificateKeyFile": "the TLS private key",
    "TLSCertificateFile": "the TLS server certificate",
    "TLSCACertificateFile": "the TLS CA certificate",
    "TLSCACertificatePath": "the TLS CA directory",
    "TLSDHParamFile": "the TLS DH parameters",
    "include": "a schema include",
    "directory": "the database directory",
}

problems = []  # (score, path, issue, directive)
for key, path in refs:
    errors_about = len(re.findall(re.escape(path) + r".*(error|No such file|denied|could not)", logs, re.I)) + \
        len(re.findall(r"(could not|error|failed).*" + re.escape(path), logs, re.I))
    if not os.path.exists(path):
        issue = "File does not exist" if key != "directory" else "Directory does not exist"
    else:
        st = os.stat(path)
        if key == "TLSCertificateKeyFile" and st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
            issue = f"Private key is world-accessible (mode {oct(st.st_mode & 0o777)})"
        elif os.path.isfile(path) and st.st_size == 0:
            issue = "File is empty"
        elif errors_about:
            issue = "Referenced file rejected by slapd (see log)"
        else:
            continue
    tls = key.startswith("TLS")
    problems.append((errors_about * 10 + (5 if tls else 0), path, issue, key))

problems.sort(reverse=True)
score, path, issue, key = problems[0]
tls_needed = "security" in open(CONF).read() and re.search(r"^\s*security\s+.*ssf=\d+", open(CONF).read(), re.M)
if key.startswith("TLS"):
    seen = " (\"TLS init def ctx failed\" in the log)" if "TLS init def ctx failed" in logs else ""
    why = (f"slapd cannot load {ROLE[key]} so TLS initialization fails{seen}, "
           f"clients' TLS negotiation is rejected{' and the configured ssf=128 security requirement cannot be met' if tls_needed else ''}, "
           f"so bind operations cannot succeed")
else:
    why = f"slapd cannot load {ROLE.get(key, key)} so the directory backend needed to verify bind credentials is unavailable"
with open("/tmp/ldap_diagnosis.txt", "w") as f:
    f.write(f"{path}\n{issue}\n{why}\n")
print(open("/tmp/ldap_diagnosis.txt").read())
for p in problems:
    print("candidate:", p)
PY
python3 /tmp/ldap_diag.py
