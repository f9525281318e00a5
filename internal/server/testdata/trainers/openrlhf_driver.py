"""Drives examples/trainers/openrlhf_agent.py as OpenRLHF does (OpenRLHF/OpenRLHF 3c3be62): the file is
loaded as vllm_engine._load_agent_executor loads --train.agent_func_path, and each sample runs the text
side of MultiTurnAgentExecutor.execute (openrlhf/utils/agent.py): one AgentInstance per sample, reset
{observation: prompt, label}, then step {observation_text, action_text, label, sampling_params} after each
generation, summing rewards.item(), keeping the last scores, appending the feedback, until done or
until the token budget (max_length, one token a character here) is spent. The openrlhf module here is
a stand-in with upstream's signatures; the policy is scripted. With AGENTWORLD_UPSTREAM naming an
OpenRLHF checkout, the real MultiTurnAgentExecutor runs instead (heavy modules stubbed, a
one-token-a-character tokenizer and a scripted engine standing in for the HF tokenizer and vLLM).
Usage: openrlhf_driver.py EXAMPLES_DIR SERVER_URL; prints each sample's result as JSON."""
import asyncio
import importlib.util
import json
import os
import re
import sys
import types
from abc import ABC, abstractmethod


# The scripted policy's replies. The first ends with the end-of-turn marker, as vLLM's text does under
# OpenRLHF's skip_special_tokens=False (openrlhf/trainer/ppo_utils/samples_generator.py) when the model
# stops on it: the world must get the action without it, and the feedback must not repeat it.
ACTIONS = ['[{"keystrokes": "ls\\n", "duration": 0.1}]<|im_end|>', "[]"]


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
        while not done and steps < 5 and max_length - len(observation) > 0:
            action = ACTIONS[steps % 2]  # the scripted policy
            result = await agent.step({"observation_text": observation, "action_text": action, "label": label,
                                       "sampling_params": sampling_params})
            total += result["rewards"].item()
            scores, logs, done = result.get("scores", total), result.get("extra_logs", {}), result["done"]
            observation += action + result["environment_feedback"]
            steps += 1
        return {"first_observation": first, "observation_text": observation, "reward": total,
                "scores": float(scores), "done": done, "extra_logs": {k: float(v) for k, v in logs.items()}}


UPSTREAM = os.environ.get("AGENTWORLD_UPSTREAM")  # an OpenRLHF checkout, to run its real executor
if UPSTREAM:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import upstream  # noqa: E402

    upstream.install(UPSTREAM)

    class _Scalar(float):  # torch.tensor of a number, as far as the executor uses it
        def item(self):
            return float(self)

    import torch  # the stub; its tensor made a number with .item()  # noqa: E402

    torch.tensor = _Scalar
    from openrlhf.utils.agent import AgentExecutorBase  # noqa: E402,F811
else:
    for name in ("openrlhf", "openrlhf.utils", "openrlhf.utils.agent"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["openrlhf.utils.agent"].__dict__.update(
        AgentExecutorBase=AgentExecutorBase, AgentInstanceBase=AgentInstanceBase, MultiTurnAgentExecutor=MultiTurnAgentExecutor)



class Ids(list):
    def tolist(self):
        return list(self)


class CharTokenizer:
    """One token a character: what upstream's executor asks of a HF tokenizer."""
    def __call__(self, text, add_special_tokens=False, return_tensors=None):
        return {"input_ids": [Ids(ord(c) for c in text)]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(map(chr, ids))


class ScriptedEngine:
    """vLLM's generate as the executor calls it, answering the scripted policy."""
    async def generate(self, tokens, sampling_params, multi_modal_data=None):
        text = ACTIONS[1] if "keystrokes" in "".join(map(chr, tokens)) else ACTIONS[0]
        out = types.SimpleNamespace(token_ids=[ord(c) for c in text], text=text, logprobs=None)
        return types.SimpleNamespace(outputs=[out])


async def run_upstream(executor, prompt, label, max_length):
    """The real execute(), its result in the stand-in's shape."""
    seen = {}
    base = executor.agent_instance_cls

    class Recording(base):
        async def reset(self, states, **kw):
            r = await super().reset(states, **kw)
            seen["first"] = r["observation"]
            return r

        async def step(self, states, **kw):
            r = await super().step(states, **kw)
            seen["done"] = r["done"]
            return r

    executor.agent_instance_cls = Recording
    sp = types.SimpleNamespace(max_tokens=None, logprobs=None)
    r = await executor.execute(prompt, label, sp, max_length, CharTokenizer(), ScriptedEngine())
    executor.agent_instance_cls = base
    return {"first_observation": seen["first"], "observation_text": "".join(map(chr, r["observation_tokens"])),
            "reward": r["reward"], "scores": float(r["scores"]), "done": seen.get("done", False),
            "extra_logs": {k: float(v) for k, v in r["extra_logs"].items()}}


async def main(examples, url):
    os.environ["AGENTWORLD_URL"] = url
    spec = importlib.util.spec_from_file_location("agent_module", os.path.join(examples, "openrlhf_agent.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    executor = module.AgentExecutor()
    prompt = "<|im_start|>user\nFix the failing test.\n\n{observation}<|im_end|>\n<|im_start|>assistant\n"
    label = json.dumps({"world_id": "shell", "group_key": "task-1"})
    run = (lambda m: run_upstream(executor, prompt, label, m)) if UPSTREAM else \
        (lambda m: executor.execute(prompt, label, None, m, None, None))
    out = [await run(4096) for _ in range(2)]  # n_samples_per_prompt
    # A budget that runs out after the first step: the executor stops before done, and the
    # episode must still be closed.
    out.append(await run(len(prompt) + 40))
    for o in out:
        o["doubled_end_markers"] = len(re.findall(r"<\|im_end\|>\s*<\|im_end\|>", o["observation_text"]))
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
