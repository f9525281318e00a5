package conversation_test

import (
	"encoding/json"
	"fmt"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
)

// One turn of a Terminal world: the agent's action is validated and
// rendered canonically, sent as the user message, and the world model's
// generation is read back to the observation.
func Example() {
	act, err := conversation.ParseAction(domain.Terminal, json.RawMessage(`[{"keystrokes": "ls\n", "duration": 1}]`))
	if err != nil {
		panic(err)
	}
	fmt.Println(conversation.UserMessage(1, act.Text, "", ""))

	gen := "<think>ls lists the project</think>\n<predicted_observation>\nREADME.md  src\n</predicted_observation>"
	obs := conversation.ExtractPrediction(gen)
	fmt.Println(conversation.ObservationResponse(obs))
	// Output:
	// ### Turn 1
	// **Action:**
	// [{"duration":1,"keystrokes":"ls\n"}]
	//
	// Predict the environment's observation for this action. Put it inside <predicted_observation></predicted_observation>.
	// **Environment Observation:**
	// README.md  src
}

func ExampleParseToolCall() {
	c, err := conversation.ParseToolCall(`{"type": "function", "function": {"name": "search", "arguments": "{\"q\": \"go\"}"}}`)
	if err != nil {
		panic(err)
	}
	text, _ := conversation.RenderToolCall(c.Name, c.Arguments)
	fmt.Println(c.Name, string(c.Arguments))
	fmt.Println(text)

	_, err = conversation.ParseToolCall(`{"name": "search", "arguments": [1]}`)
	fmt.Println(err)
	// Output:
	// search {"q":"go"}
	// {"arguments":{"q":"go"},"name":"search"}
	// malformed action: field action.arguments: must be a JSON object, got an array
}
