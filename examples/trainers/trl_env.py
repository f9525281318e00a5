"""TRL GRPOTrainer environment over an agentworld simulator (`agentworld serve`, OpenEnv HTTP).

TRL (huggingface/trl f2cd577, 2026-07-24, trl/trainer/grpo_trainer.py and docs/source/openenv.md):
environment_factory is a no-argument callable giving one instance per rollout; reset(**row) starts an
episode (TRL appends its string to the last user message as is, so it begins with a blank line here),
every other public method is a tool whose schema comes from its signature and its docstring's Args, and
get_reward() scores the finished rollout. The schema is what transformers' get_json_schema makes of the
method (utils/chat_template_utils.py): the type of each parameter, its Args line as the description, and
an `enum` only from a "(choices: [...])" suffix of that line; it has no place for `minimum`/`maximum`.
So a world tool's string enum becomes that suffix, other enums and the bounds are stated in the
description, and the method checks all three before it sends anything (TRL hands a tool's error back
to the model).
    from trl_env import agentworld_env
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=dataset,
                          environment_factory=agentworld_env("issue-tracker-mcp", "http://127.0.0.1:8080"))
The class is built from the world (GET /v1/worlds/NAME): a world with tools gets one method per tool plus
final_answer(answer), which ends the episode (the world's success rule is checked then); a text-action
world (terminal, web, android, os) gets act(action). get_reward() is the episode's summed step rewards.
Rows: {"prompt": [...], "group_key": "task-17"}: a prompt's samples share the group_key (else a hash of
the prompt) and fork one root session, the shared start TRL's docs warn GRPO groups may lack. Several
worlds: {name: agentworld_env(name)} and an `environment` column. Pinned in testdata/trainers/trl.json.
"""
import inspect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agentworld_env import DEFAULT_URL, Episode, call, group_key  # noqa: E402

TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}
SEPARATOR = "\n\n"  # between the row's last user message and the world's first observation


class AgentWorldEnv:
    base_url, world_id = DEFAULT_URL, None

    def __init__(self):
        self.episode = None

    def reset(self, **row):
        if self.episode:
            self.episode.close()
        self.episode = Episode(self.base_url, self.world_id, row.get("group_key") or group_key(row.get("prompt")),
                               row.get("seed"))
        return SEPARATOR + self.episode.reset()

    def get_reward(self):
        return self.episode.reward if self.episode else 0.0

    def _send(self, action):
        if self.episode.done:
            raise ValueError("The episode has ended.")  # TRL hands a tool's error back to the model
        return self.episode.step(action)[0]


def _describe(key, prop):
    """A parameter's Args line: its description, its bounds, then its choices (get_json_schema reads a
    trailing "(choices: [...])" of strings as the enum; other enums are stated in words)."""
    text = " ".join((prop.get("description") or key).split())
    if "minimum" in prop:
        text += f" Minimum {json.dumps(prop['minimum'])}."
    if "maximum" in prop:
        text += f" Maximum {json.dumps(prop['maximum'])}."
    enum = prop.get("enum")
    if enum and all(isinstance(v, str) for v in enum):
        text += " (choices: " + json.dumps(enum) + ")"
    elif enum:
        text += " One of " + json.dumps(enum) + "."
    return text


def _check(props, args):
    """Refuses an argument outside its property's enum or bounds, as the world's schema would."""
    for k, v in args.items():
        p = props.get(k) or {}
        if "enum" in p and v not in p["enum"]:
            raise ValueError(f"{k} must be one of {json.dumps(p['enum'])}, not {json.dumps(v)}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in p and v < p["minimum"]:
                raise ValueError(f"{k} must be at least {json.dumps(p['minimum'])}, not {json.dumps(v)}")
            if "maximum" in p and v > p["maximum"]:
                raise ValueError(f"{k} must be at most {json.dumps(p['maximum'])}, not {json.dumps(v)}")


def _method(name, description, schema, encode):
    props, required = schema.get("properties") or {}, set(schema.get("required") or [])

    def tool(self, **kwargs):
        args = {k: v for k, v in kwargs.items() if v is not None}
        _check(props, args)
        return self._send(encode(args))
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=TYPES.get(p.get("type"), str),
                                 default=inspect.Parameter.empty if k in required else None) for k, p in props.items()]
    tool.__signature__ = inspect.Signature(params, return_annotation=str)
    tool.__annotations__ = {p.name: p.annotation for p in params[1:]} | {"return": str}
    tool.__name__ = tool.__qualname__ = name
    args = "".join(f"    {k}: {_describe(k, p)}\n" for k, p in props.items())
    tool.__doc__ = f"{' '.join((description or name).split())}\n\nArgs:\n{args}\nReturns:\n    The world's observation."
    return tool


def agentworld_env(world_id, base_url=None):
    """An environment class for one world of the server at base_url (default AGENTWORLD_URL, else localhost)."""
    base = base_url or os.environ.get("AGENTWORLD_URL") or DEFAULT_URL
    space = call(base, "GET", "/v1/worlds/" + world_id)["action_space"]
    methods = {"base_url": base, "world_id": world_id}
    for t in space.get("tools") or []:
        if t["name"].isidentifier() and t["name"] not in ("reset", "get_reward", "final_answer"):
            methods[t["name"]] = _method(t["name"], t.get("description"), t.get("input_schema") or {},
                                         lambda a, n=t["name"]: json.dumps({"name": n, "arguments": a}))
    name, arg, doc = ("final_answer", "answer", "End the task with your final answer.") if space.get("tools") else \
        ("act", "action", "Send one action to the world: " + (space.get("description") or "its domain's text action."))
    one = {"type": "object", "properties": {arg: {"type": "string", "description": "The " + arg + "."}}, "required": [arg]}
    methods[name] = _method(name, doc, one, lambda a: a[arg])
    return type("AgentWorldEnv_" + world_id.replace("-", "_"), (AgentWorldEnv,), methods)
