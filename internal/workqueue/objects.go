package workqueue

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Values larger than a NATS message can hold (the server's max_payload,
// 1 MiB by default on a stock server) travel through the job's object
// store (ObjectsBucket): a job spec, an item or a result over the inline
// limit is put there in chunks, and what goes through the job's bucket
// or stream is a reference to it (name, size and SHA-256 digest). The
// object store checks each object's chunks against its own digest; the
// reader checks that digest and the size against the reference, so an
// object replaced or cut short never passes for the one referred to.
// An upload cut short (its worker killed) has no metadata and so no
// object: only a finished object can be referred to, and a result's
// reference is created after its upload.

// DefaultInlineLimit is the largest value sent inline in one message;
// anything larger goes through the object store. The server's
// max_payload (less room for headers) lowers it.
const DefaultInlineLimit = 1 << 20

// objectHeader is the header of an item message whose payload is in the
// object store: the reference as JSON, and no body.
const objectHeader = "Agentworld-Object"

// messageHeadroom is what a message carries besides its value (subject,
// headers) within the server's max_payload.
const messageHeadroom = 4 << 10

// maxChunk is the object store's default chunk size, used when the
// server takes it.
const maxChunk = 128 << 10

// maxBadObjects is how many unreadable result objects an item may have
// (each deleted and the item done again) before Do gives up on it.
const maxBadObjects = 3

// errBadObject marks an object that is gone or is not the one referred
// to: it will not become readable by waiting.
var errBadObject = errors.New("object missing or not the one referred to")

// ObjectsBucket is the name of a job's object store, where values over
// the inline limit go.
func ObjectsBucket(job string) string { return "agentworld_wqobj_" + job }

// objectRef refers to a value in a job's object store; it is the wire
// form of such a value in a job description, an item message and a
// stored result.
type objectRef struct {
	Name   string `json:"name"`
	Size   uint64 `json:"size"`
	Digest string `json:"digest"` // "SHA-256=" and the base64url digest, as the object store writes it
}

// digestPrefix begins an object's digest, as package jetstream writes it.
const digestPrefix = "SHA-256="

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return digestPrefix + base64.URLEncoding.EncodeToString(sum[:])
}

// check reports a reference that cannot refer to an object.
func (r objectRef) check() error {
	if r.Name == "" {
		return errors.New("object reference without a name")
	}
	d, ok := strings.CutPrefix(r.Digest, digestPrefix)
	if !ok {
		return fmt.Errorf("object %s: digest %q is not %s…", r.Name, r.Digest, digestPrefix)
	}
	if b, err := base64.URLEncoding.DecodeString(d); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("object %s: digest %q is not a base64url SHA-256", r.Name, r.Digest)
	}
	return nil
}

// decodeRef reads a reference (an item message's header).
func decodeRef(b []byte) (objectRef, error) {
	var r objectRef
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("object reference: %w", err)
	}
	return r, r.check()
}

// inlineLimit is the largest value nc's server takes in one message,
// capped at limit (0 means DefaultInlineLimit).
func inlineLimit(nc *nats.Conn, limit int) int {
	if limit <= 0 {
		limit = DefaultInlineLimit
	}
	if mp := nc.MaxPayload(); mp > 0 && mp-messageHeadroom < int64(limit) {
		limit = int(max(mp-messageHeadroom, 1))
	}
	return limit
}

// chunkSize is the object chunk size nc's server takes.
func chunkSize(nc *nats.Conn) uint32 {
	if mp := nc.MaxPayload(); mp > 0 && mp-messageHeadroom < maxChunk {
		return uint32(max(mp-messageHeadroom, 1))
	}
	return maxChunk
}

// openObjects opens (creating when missing) a job's object store.
func openObjects(ctx context.Context, js jetstream.JetStream, job string, replicas int) (jetstream.ObjectStore, error) {
	return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      ObjectsBucket(job),
		Description: "agentworld work-queue values of job " + job + " too large for one message",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
}

// uniqueName is name with a random suffix: concurrent uploads of one
// item's result (two deliveries) never write the same object.
func uniqueName(name string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return name + "/" + hex.EncodeToString(b[:])
}

// putObject stores data as object name in chunks nc's server takes and
// returns its reference. r, when not nil, is what the upload reads
// (tests stop an upload half way with it); nil reads data.
func putObject(ctx context.Context, obs jetstream.ObjectStore, nc *nats.Conn, name string, data []byte, r io.Reader) (objectRef, error) {
	if r == nil {
		r = bytes.NewReader(data)
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunkSize(nc)}}, r)
	if err != nil {
		return objectRef{}, fmt.Errorf("put object %s (%d bytes): %w", name, len(data), err)
	}
	ref := objectRef{Name: name, Size: info.Size, Digest: info.Digest}
	if want := digestOf(data); ref.Digest != want || ref.Size != uint64(len(data)) {
		return ref, fmt.Errorf("put object %s: stored %d bytes with digest %s, want %d bytes with %s", name, ref.Size, ref.Digest, len(data), want)
	}
	return ref, nil
}

// getObject reads the object ref refers to and checks it is that one:
// its size and digest (which the object store checks its chunks
// against). An object that is missing or differs fails with errBadObject.
func getObject(ctx context.Context, obs jetstream.ObjectStore, ref objectRef) ([]byte, error) {
	// Without a deadline of its own the read would get JetStream's
	// default of a few seconds for the whole object.
	ctx, cancel := context.WithTimeout(ctx, readTimeout(ref.Size))
	defer cancel()
	res, err := obs.Get(ctx, ref.Name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("object %s: %w: not found", ref.Name, errBadObject)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", ref.Name, err)
	}
	defer func() { _ = res.Close() }()
	info, err := res.Info()
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", ref.Name, err)
	}
	if info.Size != ref.Size || info.Digest != ref.Digest {
		return nil, fmt.Errorf("object %s: %w: it holds %d bytes with digest %s, want %d bytes with %s",
			ref.Name, errBadObject, info.Size, info.Digest, ref.Size, ref.Digest)
	}
	b := make([]byte, 0, ref.Size)
	buf := bytes.NewBuffer(b)
	if _, err := buf.ReadFrom(res); errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, fmt.Errorf("object %s: %w: %w", ref.Name, errBadObject, err)
	} else if err != nil {
		return nil, fmt.Errorf("object %s: %w", ref.Name, err)
	}
	if uint64(buf.Len()) != ref.Size || digestOf(buf.Bytes()) != ref.Digest {
		return nil, fmt.Errorf("object %s: %w: read %d bytes, want %d with digest %s", ref.Name, errBadObject, buf.Len(), ref.Size, ref.Digest)
	}
	return buf.Bytes(), nil
}

// readTimeout bounds the read of an object of size bytes: a minute, and
// a second more per MiB.
func readTimeout(size uint64) time.Duration {
	return time.Minute + time.Duration(size>>20)*time.Second
}

// deleteObject removes an object, if it is there.
func deleteObject(ctx context.Context, obs jetstream.ObjectStore, name string) error {
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete object %s: %w", name, err)
	}
	return nil
}
