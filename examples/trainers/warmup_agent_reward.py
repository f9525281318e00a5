"""A stand-in for your agent's own reward function in the warm-up walkthrough (docs/sim-rl.md).

verl_reward.py hands it every row whose data_source does not start with "agentworld/", named by
AGENTWORLD_OTHER_REWARD=examples/trainers/warmup_agent_reward.py:compute_score, with verl's
compute_score arguments. Here: 1 when the reply is the expected command, else 0.
"""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return 1.0 if " ".join(solution_str.split()) == " ".join(str(ground_truth).split()) else 0.0
