"""Drives examples/trainers/swift_gym_env.py as ms-swift's GYMScheduler does (modelscope/ms-swift 3602360,
swift/rollout/multi_turn.py): the plugin file is imported (--external_plugins), the env is made from the
row's env_config (--gym_env names it), reset gives [system, user(observation)], and after each reply step
gets the whole conversation, its rewards summed into total_reward, until done or max_turns. The swift
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


for name in ("swift", "swift.rollout", "swift.rollout.gym_env"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["swift.rollout.gym_env"].__dict__.update(Env=Env, envs={})


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
    print(json.dumps([await trajectory(envs, row, f"req-{i}") for i in range(2)]))  # num_generations = 2


asyncio.run(main(sys.argv[1], sys.argv[2]))
