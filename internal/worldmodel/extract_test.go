package worldmodel

import "testing"

func TestExtractPredictionBasics(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", NoOutput},
		{"plain", "  hello \n", "hello"},
		{"pair", "<think>x</think><predicted_observation> a </predicted_observation>", "a"},
		{"orphan close", "reasoning</think>answer", "answer"},
		{"open to tag", "<think>still thinking <predicted_observation>ok</predicted_observation>", "ok"},
		{"open to end", "before<think>never closed", "before"},
		{"last block", "<predicted_observation>1</predicted_observation><predicted_observation>2</predicted_observation>", "2"},
		{"unclosed", "<PREDICTED_OBSERVATION>tail  ", "tail"},
		{"empty tag", "<predicted_observation></predicted_observation>", ""},
		{"only thinking", "<think>a</think>   ", NoOutput},
	}
	for _, tt := range tests {
		if got := ExtractPrediction(tt.in); got != tt.want {
			t.Errorf("%s: ExtractPrediction(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}
