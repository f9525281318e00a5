package envconfig_test

import (
	"fmt"
	"os"

	"github.com/agentworld/agentworld/internal/envconfig"
)

// Help lists names and descriptions, never values: a key set in the
// environment stays out of --help.
func ExampleHelp() {
	os.Setenv(envconfig.APIKey.Name, "sk-secret")
	defer os.Unsetenv(envconfig.APIKey.Name)
	fmt.Print(envconfig.Help(envconfig.APIKey))
	fmt.Println(envconfig.APIKey.Value() == "sk-secret")
	// Output:
	// Environment variables:
	//   AGENTWORLD_API_KEY  bearer token the server requires on every route but /health (serve, reward serve) and sends (play --server), when --api-key is not given
	// true
}
