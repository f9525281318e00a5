"""Drives examples/trainers/openrlhf_agent.py as OpenRLHF does (OpenRLHF/OpenRLHF 3c3be62): the file is
loaded as vllm_engine._load_agent_executor loads --train.agent_func_path, and each sample runs the text
side of MultiTurnAgentExecutor.execute (openrlhf/utils/agent.py): one AgentInstance per sample, reset
{observation: prompt, label}, then step {observation_text, action_text, label, sampling_params} after each
generation, summing rewards.item(), keeping the last scores, appending the feedback, until done. The
openrlhf module here is a stand-in with upstream's signatures; the policy is scripted.
Usage: openrlhf_driver.py EXAMPLES_DIR SERVER_URL; prints each sample's result as JSON."""
import asyncio
import importlib.util
import json
import os
import sys
import types
from abc import ABC, abstractmethod


class AgentExecutorBase(ABC):
    @abstractmethod
    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        raise NotImplementedError


class AgentInstanceBase(ABC):
    @abstractmethod
    def __init__(self, *args, **kwargs):
        pass

    async def reset(self, states: dict, **kwargs):
        return states

    @abstractmethod
    async def step(self, state_dict: dict, **kwargs):
        raise NotImplementedError


class MultiTurnAgentExecutor(AgentExecutorBase):
    def __init__(self, agent_instance_cls):
        assert issubclass(agent_instance_cls, AgentInstanceBase)
        self.agent_instance_cls = agent_instance_cls

    async def execute(self, prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images=None):
        agent = self.agent_instance_cls()
        observation = (await agent.reset({"observation": prompt, "label": label}))["observation"]
        first, total, scores, logs, done, steps = observation, 0, 0, {}, False, 0
        while not done and steps < 5:
            action = ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"][steps % 2]  # the scripted policy
            result = await agent.step({"observation_text": observation, "action_text": action, "label": label,
                                       "sampling_params": sampling_params})
            total += result["rewards"].item()
            scores, logs, done = result.get("scores", total), result.get("extra_logs", {}), result["done"]
            observation += action + result["environment_feedback"]
            steps += 1
        return {"first_observation": first, "observation_text": observation, "reward": total,
                "scores": float(scores), "done": done, "extra_logs": {k: float(v) for k, v in logs.items()}}


for name in ("openrlhf", "openrlhf.utils", "openrlhf.utils.agent"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["openrlhf.utils.agent"].__dict__.update(
    AgentExecutorBase=AgentExecutorBase, AgentInstanceBase=AgentInstanceBase, MultiTurnAgentExecutor=MultiTurnAgentExecutor)


async def main(examples, url):
    os.environ["AGENTWORLD_URL"] = url
    spec = importlib.util.spec_from_file_location("agent_module", os.path.join(examples, "openrlhf_agent.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    executor = module.AgentExecutor()
    prompt = "<|im_start|>user\nFix the failing test.\n\n{observation}<|im_end|>\n<|im_start|>assistant\n"
    label = json.dumps({"world_id": "shell", "group_key": "task-1"})
    out = [await executor.execute(prompt, label, None, 4096, None, None) for _ in range(2)]  # n_samples_per_prompt
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
