#!/bin/sh
# Fails a pull request whose policy change widens access (someone may get in who could not), unless it carries the
# label that says a reviewer approved exactly that. Used by github-actions-policy.yml (copied to ci/policy-gate.sh);
# any other CI runs it as a step:
#
#   BASE_DIR=base/policies HEAD_DIR=policies PR_LABELS="docs widens-access" sh examples/ci/policy-gate.sh
#
# BASE_DIR: the policy directory as it is on the target branch; HEAD_DIR: as the pull request leaves it;
# PR_LABELS: the pull request's labels, separated by spaces, commas or newlines; WIDENS_LABEL: the approving label
# (default widens-access). Exit 0: nothing wider, or wider and approved; 1: wider without the label; 2: a directory
# does not load (its errors are printed), or the gate itself is misused.
set -u
: "${BASE_DIR:?BASE_DIR: the policy directory of the target branch}"
: "${HEAD_DIR:?HEAD_DIR: the policy directory of the pull request}"
label="${WIDENS_LABEL:-widens-access}"

status=0
npx --no-install iam-gateway policy diff "$BASE_DIR" "$HEAD_DIR" || status=$?

case "$status" in
  0)
    echo "policy gate: no change widens access"
    ;;
  1)
    if printf '%s\n' "${PR_LABELS:-}" | tr ', ' '\n\n' | grep -qx -- "$label"; then
      echo "policy gate: this change widens access (above); approved by the label $label"
    else
      echo "policy gate: this change widens access (the lines marked wider above). If that is intended, have it reviewed and add the label $label." >&2
      exit 1
    fi
    ;;
  *)
    echo "policy gate: a policy directory does not load (above)" >&2
    exit 2
    ;;
esac
