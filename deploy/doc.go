// Package deploy holds the files that run agentworld on several machines
// (compose.yaml, the Dockerfile, nats.conf, kubernetes/) and no code: its
// tests validate those files with the loaders that would read them. The
// compose file is loaded by Docker Compose's own loader (compose-go,
// against the compose-spec JSON schema), the Kubernetes manifests are
// built by kustomize and decoded strictly into Kubernetes' own types, the
// NATS configurations are parsed by nats-server and served by it, and
// every container's command line is parsed by agentworld's own command
// tree, its probes answered by a real serve. What no test here does is
// build an image or run a container: see docs/deployment.md.
package deploy
