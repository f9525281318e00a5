"""Drives examples/trainers/trl_env.py as TRL's GRPOTrainer drives an environment_factory (huggingface/trl
f2cd577, trl/trainer/grpo_trainer.py): one probe instance at construction, whose public methods other
than reset and get_reward are the tools (each needs typed parameters and an Args docstring, as
transformers' get_json_schema reads them); then per rollout reset(**row), the model's tool calls (a
scripted policy here), get_reward(); instances are pooled, so the second rollout reuses the first
instance. A tool called after the episode ended raises, as TRL's docs advise. reset's string is appended
to the last user message as is (grpo_trainer.py: content + observation). Each tool's schema is read as
transformers' get_json_schema reads a function (utils/chat_template_utils.py: type hints, the Args line
as description, a trailing "(choices: [...])" as enum; our own reader of that format here), and a call
outside the world's enum or bounds raises before any request.
Usage: trl_driver.py EXAMPLES_DIR SERVER_URL; prints what the trainer saw as JSON."""
import inspect
import json
import re
import sys
import typing

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


def schema_of(method):
    """The parameters' JSON schema, read from the signature and the docstring's Args lines."""
    hints = typing.get_type_hints(method)
    lines = method.__doc__.split("Args:")[1].split("Returns:")[0].strip().splitlines()
    described = dict(re.match(r"\s*(\w+): (.*)$", line).groups() for line in lines)
    props = {}
    for p in inspect.signature(method).parameters.values():
        desc = described[p.name]
        prop = {"type": JSON_TYPES[hints[p.name]], "required": p.default is inspect.Parameter.empty}
        choices = re.search(r"\(choices:\s*(.*?)\)\s*$", desc)
        if choices:
            prop["enum"] = json.loads(choices.group(1))
            desc = desc[:choices.start()].strip()
        prop["description"] = desc
        props[p.name] = prop
    return props


sys.path.insert(0, sys.argv[1])
from trl_env import agentworld_env  # noqa: E402

factory = agentworld_env("tools", sys.argv[2])
env = factory()
tools = {}
for name, method in inspect.getmembers(env, predicate=inspect.ismethod):
    if name in ("reset", "get_reward") or name.startswith("_"):
        continue
    hints = typing.get_type_hints(method)
    params = [p for p in inspect.signature(method).parameters.values()]
    assert hints.get("return") is str, (name, hints)
    for p in params:
        assert p.name in hints and f"    {p.name}: " in method.__doc__.split("Args:")[1], (name, p.name, method.__doc__)
    tools[name] = schema_of(method)
row = {"prompt": [{"role": "user", "content": "Echo hi, then finish."}], "group_key": "task-1"}
rollouts = []
for _ in range(2):  # two rollouts of one prompt, on the pooled instance
    content = row["prompt"][-1]["content"]
    first = content + env.reset(**row)  # as TRL builds the last user message
    refused = []
    for bad in ({"tone": "shout"}, {"times": 4}, {"times": 0}):
        try:
            env.echo_message(message="hi", **bad)
            refused.append("sent")
        except ValueError as e:
            refused.append(str(e))
    seen = [env.echo_message(message="hi"), env.final_answer(answer="done")]
    try:
        env.echo_message(message="again")
        after_end = "no error"
    except ValueError as e:
        after_end = str(e)
    rollouts.append({"first_observation": first, "tool_results": seen, "after_end": after_end, "refused": refused,
                     "reward": env.get_reward()})
env.reset(**row)  # the next batch's reset closes the last rollout's session
print(json.dumps({"tools": tools, "rollouts": rollouts}))
