"""Drives examples/trainers/trl_env.py as TRL's GRPOTrainer drives an environment_factory (huggingface/trl
f2cd577, trl/trainer/grpo_trainer.py): one probe instance at construction, whose public methods other
than reset and get_reward are the tools (each needs typed parameters and an Args docstring, as
transformers' get_json_schema reads them); then per rollout reset(**row), the model's tool calls (a
scripted policy here), get_reward(); instances are pooled, so the second rollout reuses the first
instance. A tool called after the episode ended raises, as TRL's docs advise.
Usage: trl_driver.py EXAMPLES_DIR SERVER_URL; prints what the trainer saw as JSON."""
import inspect
import json
import sys
import typing

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
    tools[name] = {p.name: {"type": hints[p.name].__name__, "required": p.default is inspect.Parameter.empty}
                   for p in params}
row = {"prompt": [{"role": "user", "content": "Echo hi, then finish."}], "group_key": "task-1"}
rollouts = []
for _ in range(2):  # two rollouts of one prompt, on the pooled instance
    first = env.reset(**row)
    seen = [env.echo_message(message="hi"), env.final_answer(answer="done")]
    try:
        env.echo_message(message="again")
        after_end = "no error"
    except ValueError as e:
        after_end = str(e)
    rollouts.append({"first_observation": first, "tool_results": seen, "after_end": after_end,
                     "reward": env.get_reward()})
env.reset(**row)  # the next batch's reset closes the last rollout's session
print(json.dumps({"tools": tools, "rollouts": rollouts}))
