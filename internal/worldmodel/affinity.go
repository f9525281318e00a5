package worldmodel

import "context"

type affinityKey struct{}

// WithAffinity tags a request context with the key a router uses to keep
// related requests on one replica (a simulator session, or the session its
// fork came from), so that replica's prefix cache can serve them.
func WithAffinity(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, affinityKey{}, key)
}

// Affinity returns the key set by WithAffinity, or "".
func Affinity(ctx context.Context) string {
	s, _ := ctx.Value(affinityKey{}).(string)
	return s
}

type replicaKey struct{}

// WithReplica tags a request context with the replica (its router name)
// that served the session's previous request. The session's transcript
// records it, so every node of a cluster that serves the session next
// names the same replica, and a router sends the request back there while
// it is healthy: the session's prefix cache stays warm across a takeover.
func WithReplica(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, replicaKey{}, name)
}

// Replica returns the name set by WithReplica, or "".
func Replica(ctx context.Context) string {
	s, _ := ctx.Value(replicaKey{}).(string)
	return s
}
