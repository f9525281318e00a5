// Package conversation owns the world-model conversation: every text the
// simulator sends a world model, the training samples built for it and the
// AgentWorldBench records show, and every reading of such text back.
//
// Each renderer has its parser beside it, and fuzz tests check that one
// undoes the other:
//
//   - agent actions: [ParseAction] validates an action for its domain and
//     renders its canonical text; [ParseKeystrokes] and [RenderKeystrokes]
//     are the Terminal grammar, [ParseToolCall] and [RenderToolCall] the
//     tool-call grammar of the MCP, Search and SWE domains (every alias
//     normalized), [ParseToolCallLine] its command-line form. Every
//     malformed action is an [*ActionError] naming the field path, which
//     unwraps to [ErrBadAction];
//   - the predicted observation of a generation: [ExtractPrediction],
//     [StripThinking] and [Reasoning] read what a world model wrote;
//     [Answer] writes a training target they read back.
package conversation
