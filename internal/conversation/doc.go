// Package conversation owns the world-model conversation: every text the
// simulator sends a world model, the training samples built for it and the
// AgentWorldBench records show, and every reading of such text back. The
// simulator, the dataset pipeline, the benchmark and the real environments
// all render through it, so a model is served exactly the shape it was
// trained on. The system prompt's templates live in package domain; package
// trajectory fills them from a trajectory's components.
//
// Each renderer has its parser beside it, and fuzz tests check that one
// undoes the other:
//
//   - turns: [UserMessage] is what the simulator sends for an action and
//     what a training sample shows (read by [ParseUserMessage]);
//     [ActionPrompt] is a turn's action as AgentWorldBench records show it
//     ([ParseActionPrompt], [TrimActionHeading]); [ObservationResponse] is
//     an observation as it answers an action, in requests, samples and
//     records alike, opened by [ObservationMarker] ([TrimObservationMarker];
//     [StripObservationMarker] is the published judge's reading); every
//     user message ends with [AnswerReminder]; [Example] is a few-shot
//     demonstration of a system prompt;
//   - agent actions: [ParseAction] validates an action for its domain and
//     renders its canonical text; [ParseKeystrokes] and [RenderKeystrokes]
//     are the Terminal grammar, [ParseToolCall] and [RenderToolCall] the
//     tool-call grammar of the MCP, Search and SWE domains (every alias
//     normalized), [ParseToolCallLine] its command-line form, and
//     [HumanAction] the shorthand a person types in `agentworld play`.
//     Every malformed action is a [fielderr.Error] naming the field path,
//     which unwraps to [ErrBadAction];
//   - the predicted observation of a generation: [ExtractPrediction],
//     [StripThinking] and [Reasoning] read what a world model wrote;
//     [Answer] writes a training target they read back.
package conversation
