"""Drives examples/trainers/verl_agent_loop.py as verl's AgentLoopWorker does (volcengine/verl b178a3c,
verl/experimental/agent_loop/agent_loop.py): the loop is found through the registry file, built with
AgentLoopBase's constructor arguments and run once per sample of a GRPO group (same uid). The verl module
here is a stand-in with upstream's signatures; tokenizer and policy are scripted fakes. With
AGENTWORLD_UPSTREAM naming a verl checkout, upstream's own agent_loop module is used instead (heavy modules
stubbed by upstream.py; pydantic real, so AgentLoopOutput validates the adapter's fields).
Usage: verl_driver.py EXAMPLES_DIR SERVER_URL; prints the AgentLoopOutputs as JSON."""
import asyncio
import importlib
import json
import os
import sys
import types
from types import SimpleNamespace


class AgentLoopOutput:  # a pydantic model upstream; the same fields and defaults
    def __init__(self, *, prompt_ids, response_ids, response_mask, response_logprobs=None, routed_experts=None,
                 multi_modal_data=None, reward_score=None, num_turns=0, metrics, extra_fields=None):
        self.__dict__.update(prompt_ids=prompt_ids, response_ids=response_ids, response_mask=response_mask,
                             response_logprobs=response_logprobs, reward_score=reward_score, num_turns=num_turns,
                             metrics=metrics, extra_fields=extra_fields or {})


class AgentLoopBase:
    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs):
        self.config, self.server_manager, self.tokenizer = trainer_config.config, server_manager, tokenizer
        self.processor, self.dataset_cls, self.dataset_config = processor, dataset_cls, dataset_config.config

    async def apply_chat_template(self, messages, tools=None, images=None, videos=None, remove_system_prompt=False):
        return [self.tokenizer.encode(m["role"] + ":" + m["content"]) for m in messages]

    async def run(self, sampling_params, **kwargs):
        raise NotImplementedError


registry = {}


def register(agent_name):
    def decorator(subclass):
        registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
        return subclass
    return decorator


UPSTREAM = os.environ.get("AGENTWORLD_UPSTREAM")  # a verl checkout, to run its real AgentLoopBase/Output
if UPSTREAM:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import upstream  # noqa: E402

    upstream.HEAVY.discard("pydantic")  # the real one validates AgentLoopOutput
    upstream.install(UPSTREAM, extra=("torch_npu", "packaging", "cachetools", "PIL", "prometheus_client", "psutil", "codetiming"))
    verl = types.ModuleType("verl")  # verl/__init__.py checks installed versions; its packages load as they are
    verl.__path__ = [os.path.join(UPSTREAM, "verl")]
    sys.modules["verl"] = verl
    from verl.protocol import DataProto  # noqa: E402  (what verl/__init__ exports)

    verl.DataProto = DataProto
    from verl.experimental.agent_loop import agent_loop as real  # noqa: E402

    registry = real._agent_loop_registry
else:
    for name in ("verl", "verl.experimental", "verl.experimental.agent_loop", "verl.experimental.agent_loop.agent_loop"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["verl.experimental.agent_loop.agent_loop"].__dict__.update(
        AgentLoopBase=AgentLoopBase, AgentLoopOutput=AgentLoopOutput, register=register)


class Tokenizer:
    def __init__(self):
        self.vocab = []

    def encode(self, text):
        if text not in self.vocab:
            self.vocab.append(text)
        return self.vocab.index(text)

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.vocab[i] for i in ids)

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=True, tokenize=True, **kwargs):
        """As a Hugging Face tokenizer is called by upstream's AgentLoopBase: one id per message, no
        system prompt or generation marker, so both modes give the same ids."""
        return [self.encode(m["role"] + ":" + m["content"]) for m in messages]


class Policy:  # AsyncLLMServerManager.generate, scripted: one action, then the end action
    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        text = ['[{"keystrokes": "ls\\n", "duration": 0.1}]', "[]"][self.calls % 2]
        self.calls += 1
        return SimpleNamespace(token_ids=[self.tokenizer.encode(text)], log_probs=[-0.25])


async def main(examples, url):
    sys.path.insert(0, examples)
    os.environ["AGENTWORLD_URL"] = url
    target = [line.split(":", 1)[1].strip() for line in open(os.path.join(examples, "verl_agent_loop.yaml"))
              if line.strip().startswith("_target_:")][0]
    module, cls = target.rsplit(".", 1)
    loop_cls = getattr(importlib.import_module(module), cls)
    assert registry["agentworld"]["_target_"] == target, (registry, target)
    tok = Tokenizer()
    policy = Policy(tok)
    config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(rollout=SimpleNamespace(response_length=64)))
    out = []
    for _ in range(2):  # two samples of one prompt: one uid
        loop = loop_cls(trainer_config=SimpleNamespace(config=config), server_manager=policy, tokenizer=tok,
                        processor=None, dataset_cls=None, dataset_config=SimpleNamespace(config={}))
        o = await loop.run({"temperature": 1.0, "logprobs": True}, uid="uid-7", index=0,
                           raw_prompt=[{"role": "user", "content": "Fix the failing test."}],
                           extra_info={"world_id": "shell", "max_turns": 5})
        d = o.model_dump() if hasattr(o, "model_dump") else dict(o.__dict__)  # upstream's is a pydantic model
        d["prompt_text"] = [tok.vocab[i] for i in o.prompt_ids]
        out.append(d)
    print(json.dumps(out))


asyncio.run(main(sys.argv[1], sys.argv[2]))
