"""Drives examples/trainers/swift_gym_env.py as ms-swift's GYMScheduler does (modelscope/ms-swift 3602360,
swift/rollout/multi_turn.py): the plugin file is imported (--external_plugins), the env is made from the
row's env_config (--gym_env names it), reset gives [system, user(observation)], and after each reply step
gets the whole conversation, its rewards summed into total_reward, until done or max_turns; the env is
closed only when step says done (GYMScheduler.on_turn_end). The swift
modules here are stand-ins with upstream's signatures; the policy is scripted.
Usage: swift_driver.py EXAMPLES_DIR SERVER_URL; prints each trajectory as JSON."""
import asyncio
import copy
import importlib.util
import json
import os
import sys
import types
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Dict, List, Optional


class Env(ABC):
    def __init__(self, env_config):
        self.env_config = env_config

    @abstractmethod
    async def reset(self, config):
        pass

    @abstractmethod
    async def step(self, action):
        pass

    @abstractmethod
    async def close(self):
        pass


@dataclass
class RolloutInferRequest:  # swift.infer_engine.protocol, reduced to the fields the scheduler fills
    messages: List[Dict] = field(default_factory=list)
    images: List[str] = field(default_factory=list)
    data_dict: Dict = field(default_factory=dict)
    uuid: Optional[str] = None


UPSTREAM = os.environ.get("AGENTWORLD_UPSTREAM")  # an ms-swift checkout, to run its real gym env and scheduler
if UPSTREAM:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import upstream  # noqa: E402

    upstream.install(UPSTREAM, extra=("json_repair", "packaging", "PIL", "modelscope", "peft", "trl", "vllm", "openai",
                                      "msgspec", "zmq", "requests", "sortedcontainers", "addict", "einops", "binpacking",
                                      "nltk", "rouge", "jieba", "attrdict", "simplejson", "oss2", "dacite", "charset_normalizer",
                                      "aiohttp_cors", "shortuuid", "cpm_kernels", "importlib_metadata", "qwen_vl_utils", "decord",
                                      "scipy", "sklearn", "matplotlib", "tensorboard", "liger_kernel", "gradio", "zstandard"))
    from swift.infer_engine.protocol import RolloutInferRequest  # noqa: E402,F811
    from swift.rollout.multi_turn import GYMScheduler  # noqa: E402
else:
    for name in ("swift", "swift.rollout", "swift.rollout.gym_env"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["swift.rollout.gym_env"].__dict__.update(Env=Env, envs={})


async def trajectory_upstream(envs, row, uuid, max_turns=5):
    """The same trajectory through upstream's GYMScheduler hooks (on_trajectory_start, on_turn_end, step)."""
    sched = GYMScheduler(None, max_turns, gym_env="agentworld")
    req = RolloutInferRequest(messages=copy.deepcopy(row["messages"]), data_dict=row, uuid=uuid)
    await sched.on_trajectory_start([req])
    info = {"env_session_id": sched._envs[uuid].episode.session}  # upstream keeps reset's info to itself
    replies = ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"]
    result = {"done": False, "rollout_infos": {}}
    for turn in range(1, max_turns + 1):
        req.messages.append({"role": "assistant", "content": replies[(turn - 1) % 2]})
        result = await sched.on_turn_end(req, None, turn)
        if result["done"]:
            break
        sched.step(req, None, turn)
    ri = result["rollout_infos"]
    env_left_open = uuid in sched._envs
    return {"messages": req.messages, "info": info, "total_reward": ri.get("total_reward"),
            "step_rewards": ri.get("step_rewards"), "gym_done": ri.get("gym_done"), "env_left_open": env_left_open}


async def trajectory(envs, row, uuid, max_turns=5):
    req = RolloutInferRequest(messages=copy.deepcopy(row["messages"]), data_dict=row, uuid=uuid)
    env = envs[row["env_config"].get("name", "agentworld")](row["env_config"])  # --gym_env agentworld
    observation, info, system = await env.reset(req)
    req.messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": observation}]
    replies = ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"]
    total, steps, done = 0.0, [], False
    for turn in range(max_turns):
        req.messages.append({"role": "assistant", "content": replies[turn % 2]})
        next_obs, reward, done, step_info = await env.step(copy.deepcopy(req.messages))
        total += float(reward)
        steps.append(float(reward))
        if done:
            await env.close()
            break
        req.messages.append({"role": "user", "content": next_obs})
    return {"messages": req.messages, "info": info, "total_reward": total, "step_rewards": steps, "gym_done": done}


async def main(examples, url):
    os.environ["AGENTWORLD_URL"] = url
    spec = importlib.util.spec_from_file_location("plugin", os.path.join(examples, "swift_gym_env.py"))
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    envs = sys.modules["swift.rollout.gym_env"].envs
    row = {"messages": [{"role": "system", "content": "You are a careful engineer."},
                        {"role": "user", "content": "Fix the failing test."}],
           "env_config": {"world_id": "shell", "group_key": "task-1"}}
    run = trajectory_upstream if UPSTREAM else trajectory
    out = [await run(envs, row, f"req-{i}") for i in range(2)]  # num_generations = 2
    # env_config.max_turns 1: the env ends the episode on swift's last turn, so the scheduler closes it
    cut = dict(row, env_config=dict(row["env_config"], max_turns=1))
    out.append(await run(envs, cut, "req-2"))
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
