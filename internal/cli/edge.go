package cli

import (
	"maps"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/reward"
)

// registerEdgeFlags registers the HTTP edge's flags on a server command:
// serve and reward serve share the names, the defaults and the help.
// webSocket adds --ws-idle-timeout (serve's /ws).
func registerEdgeFlags(cmd *cobra.Command, e *httpedge.Edge, webSocket bool) {
	fl := cmd.Flags()
	fl.StringSliceVar(&e.AllowedHosts, "allowed-hosts", nil, "Host names served beside localhost, loopback addresses and the --addr host (comma list; name or name:port; * any): for a proxy or a DNS name in front of the server; /health follows it too")
	fl.StringSliceVar(&e.AllowedOrigins, "allowed-origins", nil, "browser origins (scheme://host[:port], comma list; * any) whose cross-origin requests are served; none by default")
	fl.DurationVar(&e.ReadHeaderTimeout, "read-header-timeout", httpedge.DefaultReadHeaderTimeout, "time a client has to send a request's headers")
	fl.DurationVar(&e.ReadTimeout, "read-timeout", httpedge.DefaultReadTimeout, "time a client has to send a whole request, body included (handling it is not bound by it)")
	fl.DurationVar(&e.WriteTimeout, "write-timeout", httpedge.DefaultWriteTimeout, "time each write of a response may take (a slow step or batch is not bound by it, a client that stops reading is)")
	fl.DurationVar(&e.IdleTimeout, "idle-timeout", httpedge.DefaultIdleTimeout, "close keep-alive connections idle this long")
	if webSocket {
		fl.DurationVar(&e.WebSocketIdle, "ws-idle-timeout", httpedge.DefaultWebSocketIdle, "close /ws connections that send nothing this long (their sessions are released)")
	}
	fl.IntVar(&e.MaxConns, "max-conns", httpedge.DefaultMaxConns, "connections held at once; when full, the longest-idle keep-alive connection is closed for a new client, and only when all are busy do clients wait; negative: no cap")
	fl.IntVar(&e.MaxConnsPerClient, "max-conns-per-client", 0, "connections one client (a remote IP address; on loopback, the user owning the socket, except this server's user and root) holds at once (its idle ones are closed first, then it is answered 503); 0: half of --max-conns; negative: no cap")
	fl.DurationVar(&e.PressureIdleTimeout, "pressure-idle-timeout", httpedge.DefaultPressureIdleTimeout, "idle timeout while three quarters of --max-conns are held; also how long a /ws connection must wait for its client before a new client may take its slot when the cap is full")
}

// edgeSettingFlags maps the edge's settings that refusals name to their
// flags (registerEdgeFlags).
var edgeSettingFlags = map[string]string{
	httpedge.SettingAllowedHosts:      "allowed-hosts",
	httpedge.SettingAllowedOrigins:    "allowed-origins",
	httpedge.SettingMaxConnsPerClient: "max-conns-per-client",
}

// serveSettingFlags maps every setting serve's client-facing errors may
// name (fields of httpedge.Edge and sim.Options) to the flag that sets it.
var serveSettingFlags = with(edgeSettingFlags, map[string]string{
	"MaxInlineSpecBytes": "max-inline-spec-bytes",
	"MaxInlineTools":     "max-inline-tools",
	"MaxSessionBytes":    "max-session-bytes",
	"Models":             "allow-model",
	"ExtraBodyKeys":      "allow-extra-body",
	"SuccessJudge":       "success-judge-url",
})

// rewardSettingFlags is the same for reward serve (fields of
// httpedge.Edge and reward.HandlerOptions).
var rewardSettingFlags = with(edgeSettingFlags, map[string]string{
	reward.SettingMaxBatch: "max-batch",
})

func with(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// settingHints turns a setting-to-flag table into the hints a server's
// refusals end with (httpedge.Edge.Hints): "set by serve --max-inline-tools".
func settingHints(command string, flags map[string]string) map[string]string {
	out := make(map[string]string, len(flags))
	for setting, flag := range flags {
		out[setting] = "set by " + command + " --" + flag
	}
	return out
}
