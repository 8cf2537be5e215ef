#!/bin/bash
# Rewrite the validator so it accepts exactly the same language as the original, with
# no ambiguous / nested quantifiers:
#   * exactly one '@' is required (split check), so the original `(...)+` around the whole
#     address can only ever match once;
#   * `([A]+([sep]?[A]+)*)+` accepts exactly "alnum runs separated by single separators",
#     i.e. `[A]++(?:[sep][A]++)*+` (possessive: no backtracking at all);
#   * the domain is "<host>.<tld>" where tld = [a-zA-Z]{2,} contains no dot, so it is split
#     at the last dot instead of letting the regex guess where the TLD starts;
#   * `$` in the original also matches before one trailing "\n", which is kept.
# Then differential-test it against the original on exhaustive short strings and time it
# on pathological inputs.
set -e
mkdir -p /tmp

cat > /tmp/email_validator_fixed.py <<'EOF'
#!/usr/bin/env python3
"""ReDoS-safe email validator, functionally identical to /home/agent/email_validator.py.

Every regex below is anchored with fullmatch and uses only possessive quantifiers on
unambiguous alternations (alnum runs vs. single separator characters), so the regex
engine never backtracks: matching runs in O(n).
"""

import re

# Local part: alphanumeric runs separated by single '.', '_' or '-'
# (equivalent to the original ^([a-zA-Z0-9]+([._-]?[a-zA-Z0-9]+)*)+$ ).
LOCAL_RE = re.compile(r'[a-zA-Z0-9]++(?:[._-][a-zA-Z0-9]++)*+')

# Domain host (everything before the last dot): alphanumeric runs separated by single
# '.' or '-' (the original ([a-zA-Z0-9]+([.-]?[a-zA-Z0-9]+)*)+ ).
HOST_RE = re.compile(r'[a-zA-Z0-9]++(?:[.-][a-zA-Z0-9]++)*+')

# Top-level domain: at least two ASCII letters (the original \.[a-zA-Z]{2,}$ ).
TLD_RE = re.compile(r'[a-zA-Z]{2,}+')


def validate_email(email_string):
    """
    Validates email addresses (ReDoS-safe, linear time).
    Accepts exactly the inputs the original validator accepts.
    """

    if not email_string or not isinstance(email_string, str):
        return False

    # The original patterns end in `$`, which also matches just before a single
    # trailing newline; keep that behaviour.
    s = email_string[:-1] if email_string.endswith('\n') else email_string

    # Exactly one '@' (the original required split('@') to give two parts).
    if s.count('@') != 1:
        return False

    local_part, domain_part = s.split('@')

    if not LOCAL_RE.fullmatch(local_part):
        return False

    # Check for consecutive dots (invalid) - implied by LOCAL_RE, kept for clarity.
    if '..' in local_part:
        return False

    # Domain must be <host>.<tld>; the TLD contains no dot, so it follows the last dot.
    if '.' not in domain_part:
        return False
    host, tld = domain_part.rsplit('.', 1)

    if not TLD_RE.fullmatch(tld):
        return False

    if not HOST_RE.fullmatch(host):
        return False

    return True


if __name__ == '__main__':
    valid_emails = [
        'user@example.com',
        'name.lastname@company.co.uk',
        'first_last@test-domain.org',
        'user123@example.com'
    ]

    invalid_emails = [
        'not-an-email',
        '@example.com',
        'user@',
        'user@domain',
        'user..name@example.com'
    ]

    print("Testing valid emails:")
    for email in valid_emails:
        print(f"  {email}: {validate_email(email)}")

    print("\nTesting invalid emails:")
    for email in invalid_emails:
        print(f"  {email}: {validate_email(email)}")
EOF

python3 - <<'EOF'
import importlib.util, itertools, random, time

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m

orig = load('orig', '/home/agent/email_validator.py')
fixed = load('fixed', '/tmp/email_validator_fixed.py')

# exhaustive over a small alphabet covering every character class of the patterns
alphabet = ['a', 'Z', '0', '.', '-', '_', '@', '+', ' ', '\n']
n = 0
for length in range(0, 8):
    for t in itertools.product(alphabet, repeat=length):
        s = ''.join(t)
        assert orig.validate_email(s) == fixed.validate_email(s), repr(s)
        n += 1

# random longer strings built from email-like tokens
rng = random.Random(0)
tokens = ['a', 'bc', 'Z9', '0', '.', '-', '_', '@', '..', '.com', '.c', '.co', 'x1', '\n', '!', 'é', '+']
for _ in range(100000):
    s = ''.join(rng.choice(tokens) for _ in range(rng.randint(1, 9)))
    assert orig.validate_email(s) == fixed.validate_email(s), repr(s)
    n += 1

for s in ['user@example.com', 'name.lastname@company.co.uk', 'user+tag@example.com',
          'user@example.com\n', 'a@b.cc\n\n', None, 0, 123, '', '@', 'user@@example.com']:
    assert orig.validate_email(s) == fixed.validate_email(s), repr(s)
print(f"fixed validator agrees with the original on {n} inputs")

# pathological inputs: must stay fast
patho = ['a' * 5000 + '!', 'user@' + 'a' * 5000 + '!', 'a' * 5000 + '@' + 'b' * 5000 + '.c',
         'user@' + 'test.' * 2000 + '!com', 'user' + '@' * 5000 + 'x.com',
         ('a' * 100 + '.') * 50 + '@example.com', 'a@' + 'a-' * 3000 + '.com!']
for s in patho:
    t0 = time.perf_counter()
    fixed.validate_email(s)
    dt = time.perf_counter() - t0
    assert dt < 0.05, (s[:40], dt)
print("pathological inputs handled in linear time")
EOF
