// Package jetstore keeps simulator sessions in NATS JetStream, so that the
// nodes of a cluster share them: a [sim.Store] whose sessions any node can
// load, and the ownership records that say which node serves each one.
//
// A session is its transcript. Each session has a subject of one stream
// (DefaultPrefix + the id, base64url-encoded); its first message records
// the session (and a fork's inherited turns), and each later one a turn or
// a status change. Every append names the subject sequence the writer last
// saw (Nats-Expected-Last-Subject-Sequence), so a node whose copy is stale
// (another node wrote meanwhile) cannot append: the append fails with
// [sim.ErrMoved] and the manager drops its copy. One writer at a time
// holds for the transcript whatever the ownership records say.
//
// Ownership lives in two key-value buckets: DefaultOwnersBucket maps a
// session to the node serving it ([Owner]), DefaultNodesBucket holds one
// key per live node whose TTL is the lease: a node puts its key every
// third of the lease, and a node that stops doing so (killed) loses every
// session it owned when the key expires. [Store.Claim] takes a session
// over with a compare-and-set on its owner record.
//
// While a stream or bucket has no leader (RAFT elects one after a
// node died), store calls wait for it under short, repeated deadlines,
// up to Options.Wait (retry.go); a node whose own heartbeats fail meanwhile
// does not take other nodes' expired leases for their death.
//
// A third bucket, DefaultGroupsBucket, names the one root session that the
// resets of an OpenEnv group_key fork on every node ([Store.GroupRoot]).
// Fictional worlds' ledgers are a second stream, DefaultFactsStream, which
// every node's ledger follows (facts.go). Those two are created on first
// use (lazy.go), so a cluster that uses neither runs no RAFT group for
// them.
//
// Durability is the server's: JetStream acknowledges a write once it is
// in memory on a quorum and flushes to disk every two minutes by default,
// which lost acknowledged writes in Jepsen's analysis of 2.12. The
// embedded server (internal/natsserver) syncs every write (sync_interval:
// always); a cluster joined by URL should be configured the same way.
package jetstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/sim"
)

// Defaults of [Options].
const (
	DefaultStream       = "AGENTWORLD_SESSIONS"
	DefaultPrefix       = "agentworld.session."
	DefaultOwnersBucket = "agentworld_owners"
	DefaultNodesBucket  = "agentworld_nodes"
	DefaultLease        = 5 * time.Second
	// DefaultSetupTimeout bounds how long New waits for JetStream to
	// answer (a cluster elects its meta leader once a quorum is up).
	DefaultSetupTimeout = time.Minute
)

// Options configures a [Store]. Nil means every default.
type Options struct {
	// Stream names the transcript stream; "" means DefaultStream.
	Stream string
	// Prefix begins every session's subject; "" means DefaultPrefix.
	Prefix string
	// OwnersBucket and NodesBucket name the ownership buckets; "" means
	// DefaultOwnersBucket and DefaultNodesBucket.
	OwnersBucket, NodesBucket string
	// Replicas is how many servers keep each stream and bucket; 0 means 1.
	// A cluster that must survive a node's loss needs 3.
	Replicas int
	// Node is this node's name in the ownership records; "" means the
	// store takes part in no ownership (it reads and writes transcripts
	// only).
	Node string
	// Addr is this node's HTTP base URL, where other nodes forward the
	// requests of sessions it owns; "" means none.
	Addr string
	// Lease is how long a node keeps its sessions after its last
	// heartbeat; 0 means DefaultLease.
	Lease time.Duration
	// FactsStream names the stream of fictional worlds' ledgers
	// (facts.go); "" means DefaultFactsStream. FactsPrefix begins each
	// world's subject; "" means DefaultFactsPrefix.
	FactsStream, FactsPrefix string
	// GroupsBucket names the bucket of reset groups' roots (groups.go);
	// "" means DefaultGroupsBucket.
	GroupsBucket string
	// GroupTTL is how long a reset group keeps its root after the last
	// write of its entry; 0 means DefaultGroupTTL.
	GroupTTL time.Duration
	// SetupTimeout bounds New's wait for JetStream; 0 means
	// DefaultSetupTimeout.
	SetupTimeout time.Duration
	// Wait bounds how long one store call keeps trying while the cluster
	// does not answer (a stream electing a leader: retry.go) before it
	// fails with sim.ErrStoreUnavailable; 0 means DefaultWait.
	Wait time.Duration
	// Servers is how many servers of the cluster are up as this node sees
	// them, named in the warnings New logs while a stream or bucket has
	// too few servers for its Replicas; nil leaves the count out.
	Servers func() int
	// Logger receives heartbeat failures and New's waits for servers;
	// nil discards them.
	Logger *slog.Logger
}

// Store is a [sim.Store] on JetStream, with the cluster's ownership
// records. Close stops the heartbeat and hands back this node's lease
// (best-effort).
type Store struct {
	o      Options
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	owners jetstream.KeyValue
	nodes  jetstream.KeyValue
	// facts and groups are opened on first use (lazy.go)
	facts  *lazy[jetstream.Stream]
	groups *lazy[jetstream.KeyValue]
	// pub publishes an append (putTo) to the transcript or facts stream:
	// js.Publish, or a test's wrapper of it.
	pub func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
	// batch commits concurrent appends together on a replicated stream
	// (batch.go); nil publishes each alone.
	batch *batcher
	// onWait, when set, is told of every wait for another claim of a
	// reset group (tests).
	onWait func(key string)

	mu   sync.Mutex
	last map[string]uint64 // session id → its subject's last sequence this store saw
	own  ownership         // what this node knows of who owns what (owners.go)
	// claims are the tokens of this store's GroupRoot calls in progress
	claims map[string]struct{}

	// life ends when Close calls stop: the heartbeat loop and a heartbeat
	// in flight end with it.
	life    context.Context
	stop    context.CancelFunc
	done    chan struct{}
	watcher jetstream.KeyWatcher // of the nodes bucket; nil when it could not start
	watched chan struct{}        // closed when watchNodes returns
	once    sync.Once
}

// entry is one message of a session's subject.
type entry struct {
	// Kind is "create", "turn" or "status".
	Kind    string             `json:"kind"`
	Session *sim.SessionRecord `json:"session,omitempty"`
	Turns   []sim.TurnRecord   `json:"turns,omitempty"`
	Turn    *sim.TurnRecord    `json:"turn,omitempty"`
	Status  string             `json:"status,omitempty"`
	At      time.Time          `json:"at"`
}

// New opens the store on nc (which the caller closes after the store),
// creating the transcript stream and the ownership buckets when missing
// (the facts stream and groups bucket wait for their first use), and,
// with a Node, puts its first heartbeat. It retries while JetStream is
// not yet available.
func New(ctx context.Context, nc *nats.Conn, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.OwnersBucket == "" {
		o.OwnersBucket = DefaultOwnersBucket
	}
	if o.NodesBucket == "" {
		o.NodesBucket = DefaultNodesBucket
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.FactsStream == "" {
		o.FactsStream = DefaultFactsStream
	}
	if o.FactsPrefix == "" {
		o.FactsPrefix = DefaultFactsPrefix
	}
	if o.GroupsBucket == "" {
		o.GroupsBucket = DefaultGroupsBucket
	}
	if o.GroupTTL == 0 {
		o.GroupTTL = DefaultGroupTTL
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Store{o: o, log: log, nc: nc, js: js, last: map[string]uint64{}, own: newOwnership(),
		claims: map[string]struct{}{}, facts: newLazy[jetstream.Stream](), groups: newLazy[jetstream.KeyValue]()}
	s.pub = js.Publish
	setup, cancel := context.WithTimeout(ctx, o.SetupTimeout)
	defer cancel()
	if err := s.setup(setup); err != nil {
		return nil, fmt.Errorf("set up JetStream stream %s and buckets: %w", o.Stream, err)
	}
	if o.Node != "" {
		if err := natsconn.RetryGrowing(setup, s.heartbeat); err != nil {
			return nil, fmt.Errorf("put node %s's heartbeat: %w", o.Node, err)
		}
		// A node starting now judges other nodes' leases at once (judge):
		// the bucket just took its heartbeat, and waiting would only slow
		// a takeover by a node that was restarted for it.
		s.own.upSince = s.own.upSince.Add(-s.judgeAfter())
		s.life, s.stop = context.WithCancel(context.Background())
		s.done = make(chan struct{})
		go s.beat()
		s.watchNodes()
	}
	return s, nil
}

// setup creates or opens the transcript stream and the ownership buckets,
// each under its own retries: several nodes starting together create
// each at the same moment, and all but one of them get no answer
// (natsconn.RetryGrowing asks again soon). One that has too few servers
// for its replicas is tried again too (the others may still be starting),
// with a warning now and then that says what it waits for.
func (s *Store) setup(ctx context.Context) error {
	for _, o := range []struct {
		what string
		open func(context.Context) error
	}{
		{"stream " + s.o.Stream, func(ctx context.Context) (err error) {
			s.stream, err = s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name:        s.o.Stream,
				Description: "agentworld session transcripts, one subject per session",
				Subjects:    []string{s.o.Prefix + ">"},
				Storage:     jetstream.FileStorage,
				Replicas:    s.o.Replicas,
				Retention:   jetstream.LimitsPolicy,
				// group commit (batch.go); an existing stream is updated to it
				AllowAtomicPublish: s.o.Replicas > 1,
			})
			if err == nil {
				s.batchingFor(s.stream)
			}
			return err
		}},
		{"bucket " + s.o.OwnersBucket, func(ctx context.Context) (err error) {
			s.owners, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: s.o.OwnersBucket, Description: "agentworld session owners", History: 1,
				Storage: jetstream.FileStorage, Replicas: s.o.Replicas,
			})
			return err
		}},
		{"bucket " + s.o.NodesBucket, func(ctx context.Context) (err error) {
			s.nodes, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: s.o.NodesBucket, Description: "agentworld live nodes; a key's TTL is its lease", History: 1,
				TTL: s.o.Lease, Storage: jetstream.FileStorage, Replicas: s.o.Replicas,
			})
			return err
		}},
	} {
		var warned time.Time
		err := natsconn.RetryGrowing(ctx, func(ctx context.Context) error {
			err := o.open(ctx)
			if tooFewServers(err) && time.Since(warned) >= serversWarnEvery {
				warned = time.Now()
				s.log.Warn("JetStream cannot place the "+o.what+" yet: each of its replicas needs a server of its own; waiting for more servers to join (a replica count above the cluster's size never succeeds)",
					s.serversAttrs(err)...)
			}
			return err
		})
		if err != nil && !warned.IsZero() { // its last error may be another (a meta leader lost meanwhile)
			return fmt.Errorf("%s wants %d replicas, one per server, and %s: %w", o.what, s.o.Replicas, s.serversSeen(), err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// serversWarnEvery is how often setup repeats its warning while a stream
// or bucket waits for servers.
const serversWarnEvery = 10 * time.Second

// tooFewServers reports whether err refuses a stream or bucket because
// the cluster has too few servers (up) for its replicas: nats-server's "no
// suitable peers for placement" and "insufficient resources".
func tooFewServers(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jsErrCodeNoPeers || api.ErrorCode == jsErrCodeInsufficientResources)
}

// nats-server's error codes of a stream it cannot place (JSClusterNoPeersErrF
// and JSInsufficientResourcesErr), which nats.go does not name.
const (
	jsErrCodeNoPeers               jetstream.ErrorCode = 10005
	jsErrCodeInsufficientResources jetstream.ErrorCode = 10023
)

// serversAttrs are the log attributes of a wait for servers.
func (s *Store) serversAttrs(err error) []any {
	attrs := []any{"replicas", s.o.Replicas}
	if s.o.Servers != nil {
		attrs = append(attrs, "servers", s.o.Servers())
	}
	return append(attrs, "err", err)
}

// serversSeen says how many servers this node sees, for an error.
func (s *Store) serversSeen() string {
	if s.o.Servers == nil {
		return "too few servers are up"
	}
	return fmt.Sprintf("this node sees %d", s.o.Servers())
}

// key is id as a subject token and a bucket key: base64url, so the
// letters, digits, '.', '_' and '-' of a session id never split a subject.
func key(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func (s *Store) subject(id string) string { return s.o.Prefix + key(id) }

func (s *Store) remember(id string, seq uint64) {
	s.mu.Lock()
	s.last[id] = seq
	s.mu.Unlock()
}

// forget drops what this store knows of session id: its last sequence
// and that this node owns it. After an append another writer beat
// (sim.ErrMoved) this node is no longer the one serving it; after a
// session ends no more steps are expected.
func (s *Store) forget(id string) {
	s.mu.Lock()
	delete(s.last, id)
	delete(s.own.mine, id)
	s.mu.Unlock()
}

// unavailable marks err as [sim.ErrStoreUnavailable] when it says the
// cluster did not answer ([transient]) rather than refusing the request:
// clients are told to retry instead of getting a 500. A write's cached
// last sequence is kept, so if the write did land the retry's
// expected-sequence check finds it ([sim.ErrMoved]) and the session is
// reloaded, never appended twice.
func unavailable(err error) error {
	if err == nil || errors.Is(err, sim.ErrStoreUnavailable) || !transient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", sim.ErrStoreUnavailable, err)
}

// overMaxPayload is err, naming the server's max_payload and marked
// sim.ErrTooLarge, when the client refused an entry of n bytes for its
// size: an entry is one message, so a turn (or a fork's first message,
// which holds every inherited turn) larger than the server takes cannot
// be stored until max_payload is raised.
func (s *Store) overMaxPayload(err error, n int) error {
	if !errors.Is(err, nats.ErrMaxPayload) {
		return err
	}
	return fmt.Errorf("%w: an entry of %d bytes is over the NATS server's max_payload of %d bytes (raise it; the embedded server takes %d): %w",
		sim.ErrTooLarge, n, s.nc.MaxPayload(), MaxPayload, err)
}

// isWrongLastSequence reports a failed expected-sequence check.
func isWrongLastSequence(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// inProcess reports whether err refuses a publish because its subject
// has a message the stream's leader is still applying (an R>1 stream's
// JSErrCodeStreamWrongLastSequenceConstant; a message that is applied
// and not the expected one gets JSErrCodeStreamWrongLastSequence).
func inProcess(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// errInProcess: a publish met its subject's earlier message still being
// applied; tried again (transient).
var errInProcess = errors.New("the subject's last message is still being applied")

// CreateSession implements sim.Store: one message holding the session
// and its turns, accepted only while the subject is empty. With a Node,
// this node becomes the session's owner.
func (s *Store) CreateSession(ctx context.Context, rec sim.SessionRecord, turns []sim.TurnRecord) error {
	data, err := json.Marshal(entry{Kind: "create", Session: &rec, Turns: turns, At: rec.UpdatedAt})
	if err != nil {
		return fmt.Errorf("encode session %s: %w", rec.ID, err)
	}
	seq, err := s.put(ctx, s.subject(rec.ID), data, 0)
	if isWrongLastSequence(err) {
		return fmt.Errorf("%w: %s is in the store", sim.ErrSessionExists, rec.ID)
	}
	if err != nil {
		return unavailable(s.overMaxPayload(fmt.Errorf("store session %s: %w", rec.ID, err), len(data)))
	}
	s.remember(rec.ID, seq)
	if s.o.Node != "" {
		if err := s.putOwner(ctx, rec.ID, rec.Backend); err != nil {
			return err
		}
	}
	return nil
}

// AppendTurn implements sim.Store.
func (s *Store) AppendTurn(ctx context.Context, id string, t sim.TurnRecord, status string) error {
	return s.append(ctx, id, entry{Kind: "turn", Turn: &t, Status: status, At: time.Now().UTC()})
}

// resultTurn is a [sim.TurnRecord] whose result the step already
// encoded; it encodes as the record does (TestResultTurnIsTurnRecord).
type resultTurn struct {
	Turn int `json:"turn"`
	sim.HistoryTurn
	Result json.RawMessage `json:"result"`
}

// resultEntry is a turn's entry with its result already encoded.
type resultEntry struct {
	Kind   string     `json:"kind"`
	Turn   resultTurn `json:"turn"`
	Status string     `json:"status,omitempty"`
	At     time.Time  `json:"at"`
}

// AppendTurnResult implements sim.ResultAppender: the turn's message
// carries result as the step encoded it for its reply, not encoded again.
func (s *Store) AppendTurnResult(ctx context.Context, id string, t sim.TurnRecord, result []byte, status string) error {
	data, err := json.Marshal(resultEntry{Kind: "turn", Turn: resultTurn{Turn: t.Turn, HistoryTurn: t.HistoryTurn, Result: result},
		Status: status, At: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("encode session %s turn: %w", id, err)
	}
	return s.publish(ctx, id, "turn", status, data)
}

// SetStatus implements sim.Store.
func (s *Store) SetStatus(ctx context.Context, id, status string) error {
	return s.append(ctx, id, entry{Kind: "status", Status: status, At: time.Now().UTC()})
}

// append publishes e (see publish).
func (s *Store) append(ctx context.Context, id string, e entry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode session %s %s: %w", id, e.Kind, err)
	}
	return s.publish(ctx, id, e.Kind, e.Status, data)
}

// publish appends data, an entry of kind with status, to id's subject
// after the last message this store saw of it (or the subject's last,
// for a session it never loaded).
func (s *Store) publish(ctx context.Context, id, kind, status string, data []byte) error {
	s.mu.Lock()
	seq, ok := s.last[id]
	s.mu.Unlock()
	if !ok {
		m, err := s.lastMsg(ctx, s.subject(id))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("session %s: %w", id, sim.ErrNotFound)
		}
		if err != nil {
			return unavailable(fmt.Errorf("session %s: %w", id, err))
		}
		seq = m.Sequence
	}
	at, err := s.put(ctx, s.subject(id), data, seq)
	if isWrongLastSequence(err) {
		s.forget(id)
		return fmt.Errorf("session %s: another writer appended after sequence %d (%v): %w", id, seq, err, sim.ErrMoved)
	}
	if err != nil {
		return unavailable(s.overMaxPayload(fmt.Errorf("store session %s %s: %w", id, kind, err), len(data)))
	}
	if status != "" && status != sim.StatusActive {
		s.forget(id) // ended: no more steps are expected
	} else {
		s.remember(id, at)
	}
	return nil
}

// putOne publishes data alone to subj if the subject's last message is
// seq (0: the subject is empty) and returns the new message's sequence,
// trying again while the stream does not answer (retry). An attempt that
// timed out (or a batch that got no answer: unsure) may have stored data
// without its acknowledgement arriving; then a later attempt fails the
// sequence check on that very message, so such a failure is looked at:
// the subject's first message after seq, if equal to data (entries carry
// their time, so another writer's never is), is this call's, and its
// sequence the answer, even when another writer appended after it. A
// check refused because the subject's message is still being applied (a
// replicated stream under load: the timed-out attempt's own, committed
// but not yet applied, or the previous append's, acknowledged before the
// server cleared it) is made again once it is. Any other failed check is
// returned as it is.
func (s *Store) putOne(ctx context.Context, subj string, data []byte, seq uint64, unsure bool) (uint64, error) {
	return s.putTo(ctx, appendLog{st: s.stream, name: s.o.Stream, wait: s.o.Wait, oneWriter: true}, subj, data, seq, unsure)
}

// appendLog is a stream the store appends to at expected positions: the
// transcripts, or the ledgers (facts.go).
type appendLog struct {
	st   jetstream.Stream
	name string
	wait time.Duration // how long an append keeps trying (retryFor)
	// oneWriter: a subject has one writer at a time (a session's owner),
	// so a refusal because its last message is still being applied is
	// most likely that writer's own message and is asked again; on a
	// subject of many writers (a world's ledger) it is most likely
	// another's, and is returned as refused at once (unless this call's
	// own unanswered attempt may be the one being applied).
	oneWriter bool
}

// putTo is putOne on the stream l.
func (s *Store) putTo(ctx context.Context, l appendLog, subj string, data []byte, seq uint64, unsure bool) (uint64, error) {
	var at uint64
	err := s.retryFor(ctx, l.wait, func(ctx context.Context) error {
		ack, err := s.pub(ctx, subj, data, jetstream.WithExpectStream(l.name),
			jetstream.WithExpectLastSequencePerSubject(seq), jetstream.WithRetryAttempts(0))
		switch {
		case err == nil:
			at = ack.Sequence
			return nil
		case (unsure || l.oneWriter) && inProcess(err):
			// The subject has a message its leader is still applying:
			// this call's attempt that timed out (unsure), or the one
			// writer's message before, whose acknowledgement nats-server
			// can send before it clears the subject's mark. Its check can
			// be made once it is applied, so ask again: another writer's
			// message is then refused as wrong-last-sequence. (Not
			// wrapped: a call that runs out of time here was not
			// refused.)
			return fmt.Errorf("%w (%v)", errInProcess, err)
		case isWrongLastSequence(err) && unsure:
			// An earlier attempt of this call that was stored is the
			// subject's first message after seq (it could be stored
			// nowhere else), whatever another writer appended since.
			m, gerr := l.st.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subj))
			switch {
			case gerr == nil && bytes.Equal(m.Data, data):
				at = m.Sequence
				return nil
			case errors.Is(gerr, jetstream.ErrMsgNotFound):
				// the publish met a message the read does not see yet
				return fmt.Errorf("%w (%v)", errInProcess, gerr)
			case gerr != nil:
				// look again on the next attempt (a read that outlived
				// the attempt's deadline too): the refusal may be this
				// call's own message
				return gerr
			}
		case !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders):
			unsure = true // nobody took it: not stored
		}
		return err
	})
	return at, err
}

// lastMsg is subj's last message, read from the stream's leader (retried
// while it does not answer).
func (s *Store) lastMsg(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		m, err = s.stream.GetLastMsgForSubject(ctx, subj)
		return err
	})
	return m, err
}

// LoadSession implements sim.Store: it replays the session's subject.
func (s *Store) LoadSession(ctx context.Context, id string) (sim.SessionRecord, []sim.TurnRecord, error) {
	var rec sim.SessionRecord
	var turns []sim.TurnRecord
	created := false
	last, err := s.walk(ctx, s.stream, s.subject(id), 0, s.o.Wait, "load session "+id, func(m *jetstream.RawStreamMsg) error {
		var e entry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return fmt.Errorf("session %s: message %d: %w", id, m.Sequence, err)
		}
		switch {
		case e.Kind == "create" && !created && e.Session != nil:
			rec, turns, created = *e.Session, e.Turns, true
		case e.Kind == "turn" && created && e.Turn != nil:
			turns = append(turns, *e.Turn)
			rec.Status, rec.UpdatedAt = e.Status, e.At
		case e.Kind == "status" && created:
			rec.Status, rec.UpdatedAt = e.Status, e.At
		default:
			return fmt.Errorf("session %s: message %d: unexpected %q entry", id, m.Sequence, e.Kind)
		}
		return nil
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return sim.SessionRecord{}, nil, fmt.Errorf("session %s: %w", id, sim.ErrNotFound)
	}
	if err != nil {
		return sim.SessionRecord{}, nil, err
	}
	s.remember(id, last)
	return rec, turns, nil
}

// walk reads the messages of subject subj of st after sequence after, in
// order, giving each to each, and returns the sequence of the last one
// (after when none is newer), or jetstream.ErrMsgNotFound when the
// subject has no message. Each read is retried as retry does, for up to
// wait; what says what the reading is for in its errors ("load session
// x").
func (s *Store) walk(ctx context.Context, st jetstream.Stream, subj string, after uint64, wait time.Duration,
	what string, each func(*jetstream.RawStreamMsg) error) (uint64, error) {
	var last *jetstream.RawStreamMsg
	err := s.retryFor(ctx, wait, func(ctx context.Context) (err error) {
		last, err = st.GetLastMsgForSubject(ctx, subj)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return after, err
	}
	if err != nil {
		return after, unavailable(fmt.Errorf("%s: %w", what, err))
	}
	pos := after
	for pos < last.Sequence {
		m, seq := last, pos+1
		if seq < last.Sequence {
			if err := s.retryFor(ctx, wait, func(ctx context.Context) (err error) {
				m, err = st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
				return err
			}); err != nil {
				return after, unavailable(fmt.Errorf("%s from sequence %d: %w", what, seq, err))
			}
		}
		if err := each(m); err != nil {
			return after, err
		}
		pos = m.Sequence
	}
	return pos, nil
}
