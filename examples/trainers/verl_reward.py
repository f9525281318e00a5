"""verl custom reward function backed by `agentworld reward serve`.

verl config (volcengine/verl b178a3c, 2026-01-29, verl/trainer/config/ppo_trainer.yaml;
newer verl nests the same keys under reward.):
    custom_reward_function.path=examples/trainers/verl_reward.py
    custom_reward_function.name=compute_score
Data: the Parquet of `agentworld data export --mode rl`: data_source "agentworld/<domain>",
reward_model.ground_truth the real observation, extra_info.messages the prompt's turns (the
history and the current action, which verl does not hand a reward function otherwise).
verl's naive reward manager calls compute_score(data_source=, solution_str=, ground_truth=,
extra_info=) once per response; a dict result's "score" is the reward, the other keys are
logged as reward_extra_info.
"""
from agentworld_reward import item, prompt_of, score_items


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    info = extra_info or {}
    [r] = score_items([item(data_source, solution_str, ground_truth, prompt_of(None, info), info.get("id", ""))])
    c = r["components"]
    return {"score": r["score"] if r["score"] is not None else 0.0,
            "rubric": c["rubric"], "rule": c["rule"], "dropped": bool(r.get("dropped"))}
