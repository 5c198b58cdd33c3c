#!/usr/bin/env python3
"""Decisions for a Python host behind iam-gateway (docs/host-integration.md), with the standard library only.

The gateway sends every request it forwards with an X-IAM-Assertion header (iam.forward.assertion.enabled). The
host sends that assertion back as the bearer of POST /iam/authorization/check and /plan: the gateway verifies it
(its own signature, issuer, audience, expiry, and that the session still lives) and answers for that user. The host
needs no secret and no JWT library; a 401 means the assertion is not (or no longer) good.

Run as a script (the tests do, against `npm run demo`):
    python3 examples/host-python/decisions.py http://127.0.0.1:8080 "$ASSERTION"
"""
import json
import sys
import urllib.error
import urllib.request


class GatewayRefused(Exception):
    """The gateway answered with a problem (application/problem+json): status, code and decisionId are in it."""

    def __init__(self, status, problem):
        super().__init__(problem.get("detail") or problem.get("title") or "status %d" % status)
        self.status = status
        self.problem = problem


def _post(gateway_url, path, assertion, body):
    request = urllib.request.Request(
        gateway_url.rstrip("/") + path,
        data=json.dumps(body).encode("utf-8"),
        headers={"Authorization": "Bearer " + assertion, "Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.loads(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        raise GatewayRefused(error.code, json.loads(error.read().decode("utf-8") or "{}")) from None


def check(gateway_url, assertion, checks):
    """One call for every check of the request: [{"allowed", "status", "failedStep", "decisionId"}], in order."""
    return _post(gateway_url, "/iam/authorization/check", assertion, {"checks": checks})["results"]


def require(gateway_url, assertion, permission_code, resource=None):
    """Raises GatewayRefused (403, with the decisionId) unless the gateway allows it."""
    result = check(gateway_url, assertion, [{"permissionCode": permission_code, **({"resource": resource} if resource else {})}])[0]
    if not result["allowed"]:
        raise GatewayRefused(403, {"status": 403, "code": "IAM_ACCESS_DENIED", "decisionId": result["decisionId"], "step": result["failedStep"]})


def plan(gateway_url, assertion, permission_code, resource_type, access="READ"):
    """{"kind": "ALL"} | {"kind": "NONE"} | {"kind": "SOME", "ids": [...]}: filter the host's own query with it."""
    answer = _post(gateway_url, "/iam/authorization/plan", assertion, {"permissionCode": permission_code, "resourceType": resource_type, "access": access})
    return {key: answer[key] for key in ("kind", "ids") if key in answer}


def visible_projects(gateway_url, assertion, all_projects):
    """What GET /api/projects of a Python host would list: the rows the plan keeps."""
    allowed = plan(gateway_url, assertion, "project:read", "PROJECT")
    if allowed["kind"] == "ALL":
        return all_projects
    if allowed["kind"] == "NONE":
        return []
    return [project for project in all_projects if project["id"] in allowed["ids"]]


if __name__ == "__main__":
    gateway, assertion = sys.argv[1], sys.argv[2]
    projects = [{"id": "1", "name": "Apollo"}, {"id": "2", "name": "Gemini"}, {"id": "3", "name": "Mercury"}]
    write = lambda project_id: {"permissionCode": "project:update", "resource": {"type": "PROJECT", "id": project_id, "access": "WRITE"}}
    report = {"visible": [project["id"] for project in visible_projects(gateway, assertion, projects)], "write": check(gateway, assertion, [write("1"), write("2")])}
    try:
        require(gateway, assertion, "project:update", {"type": "PROJECT", "id": "2", "access": "WRITE"})
        report["move_to_2"] = "allowed"
    except GatewayRefused as refused:
        report["move_to_2"] = {"status": refused.status, "decisionId": refused.problem.get("decisionId")}
    print(json.dumps(report))
