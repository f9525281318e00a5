// Package trajectory holds the data shapes every part of agentworld speaks:
// AgentWorldBench records (one evaluated turn of a real trajectory) and the
// JSONL reading and writing that keeps them byte-faithful.
package trajectory
