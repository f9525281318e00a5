"""ms-swift ORM plugin backed by `agentworld reward serve`.

    agentworld data export --mode rl trajs.jsonl -o rl-swift.jsonl --format swift
    swift rlhf --rlhf_type grpo --external_plugins examples/trainers/swift_orm.py \
        --reward_funcs agentworld --dataset rl-swift.jsonl ...

ms-swift (modelscope/ms-swift 3602360, 2026-08-22): ORM subclasses are registered in
swift.rewards.orms and built as orms[name](args=args) (swift/rlhf_trainers/utils.py);
swift/rl_core/grpo_algorithm.py compute_rewards_per_func calls each with the completions
(strings) plus every column of the rows as keyword lists (RowPreprocessor.rows_to_batched):
`messages` (the prompt with the completion last), and here the other columns of `agentworld
data export --mode rl` (data_source, reward_model, extra_info). A None reward becomes NaN.

The column name matters: swift's AutoPreprocessor reads a `prompt` column as the text of
one user query (swift/dataset/preprocessor/core.py, ResponsePreprocessor), while a
`messages` column is read as the conversation; `--format swift` writes the prompt as
`messages` (a plain RL export needs --columns '{"prompt": "messages"}'). Then the row's chat
messages (system, the earlier turns, the current action) are what the policy sees and what
the judge gets.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agentworld_reward import item, prompt_of, score_items  # noqa: E402
from swift.rewards import ORM, orms  # noqa: E402


class AgentWorldReward(ORM):
    def __call__(self, completions, data_source, reward_model, extra_info=None, messages=None, **kwargs):
        n = len(completions)
        extra_info = extra_info or [{}] * n
        # the conversation less its last message (the completion) is the prompt; else extra_info.messages
        prompts = [m[:-1] if m else None for m in messages] if messages else [None] * n
        results = score_items([item(ds, c, rm["ground_truth"], prompt_of(p, ei), (ei or {}).get("id", ""))
                               for c, ds, rm, ei, p in zip(completions, data_source, reward_model, extra_info, prompts)])
        return [r["score"] for r in results]  # None for a dropped item: swift counts it as NaN


orms["agentworld"] = AgentWorldReward
