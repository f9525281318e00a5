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
