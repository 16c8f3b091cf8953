"""Issue 32's "done when": a repository whose agent registers 12 tools and gets its context back as a
tool_result is measured by the real ``needle check`` (a child process) with ``provider`` set to
``bedrock``, ``vertex`` and ``azure`` in turn, credentials and endpoints from the environment the
clouds' GitHub login actions leave (pointed at loopback fakes of each cloud's own routes), no
Anthropic or OpenAI variable set at all.

For each cloud: the run exits 0 (a model that finds every needle) with recall cells measured;
every model call went to that cloud's own route and nothing else was called; for Claude on Bedrock
and Vertex AI the budget was counted by the cloud's count endpoint (``tokenizer = "anthropic"``)
and equals what that endpoint answers for the request ``needle render`` shows.
"""

from __future__ import annotations

import base64
import json
import re

import pytest

from tests.builders import Project
from tests.fakes.azure_server import FakeAzure
from tests.fakes.bedrock_server import FakeBedrock
from tests.fakes.simulated_model import SimulatedModel, flat, u_shape
from tests.fakes.vertex_server import FakeVertex
from tests.needle_cli import needle_env, run_needle

# Twelve tools of a support agent, in our own words; the first is the one the context comes back from
TOOL_NAMES = (
    "search_help_center",
    "get_order",
    "list_orders",
    "cancel_order",
    "refund_payment",
    "update_address",
    "track_parcel",
    "open_ticket",
    "add_ticket_note",
    "check_stock",
    "apply_coupon",
    "handoff_to_human",
)
TOOLS = [
    {
        "name": name,
        "description": f"Support tool {i + 1}: {name.replace('_', ' ')}.",
        "input_schema": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    }
    for i, name in enumerate(TOOL_NAMES)
]
TEMPLATE = """system:
You are the support assistant of a parcel company. Answer from the search results only.
user:
{% for note in notes %}{{ note }}
{% endfor %}
{{ question }}
"""
FIXTURE = """notes:
  - "Parcels to islands take two extra days."
  - "Refunds go back to the card used for the order."
  - "The returns desk closes at six on Fridays."
question: "When does the returns desk close on Fridays?"
"""
CLOUDS = {
    "bedrock": ("global.anthropic.claude-sonnet-5-5-v1:0", 'tokenizer = "anthropic"'),
    "vertex": ("claude-sonnet-5-5@20261001", 'tokenizer = "anthropic"'),
    "azure": ("prod-gpt-4o", 'tokenizer = "tiktoken:o200k_base"'),
}
ROUTES = {
    "bedrock": re.compile(r"/model/[^/]+/(invoke|count-tokens)"),
    "vertex": re.compile(r"/v1/projects/[^/]+/locations/[^/]+/publishers/anthropic/models/[^/]+:rawPredict"),
    "azure": re.compile(r"/openai/deployments/prod-gpt-4o/chat/completions\?api-version=[0-9a-z-]+"),
}


def write_repo(root, provider: str):
    model, tokenizer = CLOUDS[provider]
    toml = f"""[defaults]
provider = "{provider}"
model = "{model}"
{tokenizer}
reserve_output_tokens = 256
max_input_tokens = 20000

[defaults.recall]
sizes = [1000, 2000]
depths = [0.0, 0.5, 1.0]
trials = 3
early_stop = false
threshold = 0.8
max_output_tokens = 32
seed = 3

[prompts.support]
template = "prompts/support.j2"
fixtures = ["fixtures/ticket.yaml"]
tools = "tools.json"
context_var = "notes"
question_var = "question"
context_as = "tool_result"
"""
    project = Project(root).template("prompts/support.j2", TEMPLATE).fixture("fixtures/ticket.yaml", FIXTURE)
    (root / "tools.json").write_text(json.dumps(TOOLS, indent=2))
    return project.config(toml, dedent=False).config_path


def cloud_env(fake_env: dict, tmp_path) -> dict:
    """This process's environment without any provider's variables, plus the cloud's."""
    drop = ("ANTHROPIC_", "OPENAI_", "AZURE_", "AWS_", "GOOGLE_", "CLOUD_ML_", "GCLOUD_")
    env = {k: v for k, v in needle_env().items() if not k.startswith(drop)}
    # no developer login of this machine may stand in for the cloud's environment
    env.update(HOME=str(tmp_path / "home"), AWS_EC2_METADATA_DISABLED="true", NO_COLOR="1")
    env["NEEDLE_CACHE_DIR"] = str(tmp_path / "cache")
    return {**env, **fake_env}


def fake_for(provider: str, responder):
    if provider == "bedrock":
        return FakeBedrock(responder)
    if provider == "vertex":
        return FakeVertex(responder)
    return FakeAzure(responder, deployments={"prod-gpt-4o": "gpt-4o"})


def counted_bodies(provider: str, fake) -> list[dict]:
    """The Messages requests the cloud's count endpoint received, as the fake read them."""
    out = []
    for r in fake.requests:
        if provider == "bedrock" and r["path"].endswith("/count-tokens"):
            out.append(json.loads(base64.b64decode(r["json"]["input"]["invokeModel"]["body"])))
        elif provider == "vertex" and "count-tokens:rawPredict" in r["path"]:
            out.append(r["json"])
    return out


def model_calls(fake) -> list[dict]:
    """The requests that asked the model (not its count endpoint)."""
    return [r for r in fake.requests if "count-tokens" not in r["path"]]


@pytest.mark.slow  # two CLI runs per cloud, ~15 s each on 2 shared cores
@pytest.mark.parametrize("provider", list(CLOUDS))
def test_needle_check_measures_the_agent_on_each_cloud(tmp_path, provider):
    config = write_repo(tmp_path / "repo", provider)
    out = tmp_path / "results.json"
    with fake_for(provider, SimulatedModel(flat(1.0), seed=4)) as fake:
        env = cloud_env(fake.env(), tmp_path)
        rendered = run_needle(["render", "support", "--format", "json", "--config", str(config)], env=env)
        run = run_needle(["check", "--config", str(config), "--json", str(out)], env=env)
    assert "Traceback" not in run.stderr, run.stderr
    assert rendered.returncode == 0, rendered.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(out.read_text())
    (prompt,) = results["prompts"]
    recall = prompt["recall"]
    assert len(recall["cells"]) == 2 * 3
    assert all(c["trials"] == 3 and c["hits"] == 3 for c in recall["cells"])
    assert recall["calls"] == results["totals"]["calls"] == 18

    # every model call went to the cloud's own route, and the run called nothing else
    assert all(ROUTES[provider].fullmatch(r["path"]) for r in fake.requests), {
        r["path"] for r in fake.requests
    }
    calls = model_calls(fake)
    assert len(calls) == recall["calls"]
    sent = [r["json"] for r in calls]
    if provider == "azure":
        assert all(
            len(body["tools"]) == 12 and any(m["role"] == "tool" for m in body["messages"]) for body in sent
        )
    else:
        assert all(len(body["tools"]) == 12 for body in sent)
        assert all(
            any(b.get("type") == "tool_result" for b in body["messages"][-1]["content"]) for body in sent
        )

    (case,) = prompt["cases"]
    count = case["count"]
    if provider == "azure":  # tiktoken, for the deployment's model family (gpt-4o: o200k_base)
        assert count["counter"] == "tiktoken:o200k_base"
        assert count["exact"] is True
        return
    # the budget was counted by the cloud's count endpoint, and equals its answer for the request
    body = json.loads(rendered.stdout)
    assert len(body["tools"]) == 12
    expected = fake.prompt_tokens(body)
    assert count == {
        **count,
        "tokens": expected,
        "raw_tokens": expected,
        "counter": "anthropic",
        "exact": True,
    }
    counted = counted_bodies(provider, fake)
    assert counted, "the count endpoint was called"
    assert expected in {fake.prompt_tokens(b) for b in counted}


@pytest.mark.slow  # one more CLI run per cloud
@pytest.mark.parametrize("provider", list(CLOUDS))
def test_a_model_lost_in_the_middle_fails_the_check_on_each_cloud(tmp_path, provider):
    config = write_repo(tmp_path / "repo", provider)
    out = tmp_path / "results.json"
    model = SimulatedModel(u_shape(edge=0.99, middle=0.0, margin=0.1), seed=2)
    with fake_for(provider, model) as fake:
        run = run_needle(
            ["check", "--config", str(config), "--json", str(out)], env=cloud_env(fake.env(), tmp_path)
        )
    assert run.returncode == 1, run.stdout + run.stderr
    cells = json.loads(out.read_text())["prompts"][0]["recall"]["cells"]
    missed = {c["depth"] for c in cells if c["hits"] < c["trials"]}
    # the slot's middle is the prompt's middle; its end is the prompt's end. (Its start comes after
    # the twelve tool schemas, well inside the prompt, so a model lost in the middle may miss it too.)
    assert 0.5 in missed
    assert 1.0 not in missed
    assert fake.requests
