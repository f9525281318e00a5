// Package fielderr is the one error type for input that is wrong at a
// field: a world spec, a perturbation rule, a fact, a trajectory, a
// request body. An [Error] carries the field's path (turns[3].observation,
// world.action_space.tools[0].name), what is wrong with it, and the
// sentinel error of its kind, so errors.Is matches the kind while
// [Error.Public] gives a message fit to show a client (path and problem,
// no internal chain).
//
// A field error raised inside a nested value is moved under the outer
// field with [Under] rather than converted by hand.
package fielderr

import (
	"errors"
	"fmt"
	"strings"
)

// Error says which field of some input is wrong and why.
type Error struct {
	// Path locates the field: dotted names and [i] indexes, e.g.
	// "rules[0].when.tool".
	Path string
	// Msg says what is wrong with the field.
	Msg string
	// Kind is the sentinel error of the input's kind (e.g.
	// world.ErrInvalid); errors.Is matches it and Error prefixes it. Nil
	// means none.
	Kind error
	// Err is the underlying cause, matched by errors.Is and errors.As and
	// printed after Msg; nil means none.
	Err error

	// Setting names the operator's setting that decided this error, a
	// configuration field such as "MaxInlineSpecBytes", when the input is
	// refused by a limit or an allow-list rather than being wrong in itself;
	// a caller that knows how the setting is changed (a command-line flag)
	// can say so. "" means none. Public and Error leave it out.
	Setting string
	// inner is the field error this one was moved from by Under; it stays
	// in the chain so the inner kind still matches.
	inner *Error
}

// New returns an error of kind on path with a formatted message.
func New(kind error, path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

// Wrap returns an error of kind on path whose message is err's.
func Wrap(kind error, path string, err error) *Error {
	return &Error{Path: path, Kind: kind, Err: err}
}

// WithSetting sets e.Setting and returns e.
func (e *Error) WithSetting(setting string) *Error {
	e.Setting = setting
	return e
}

// Detail is what is wrong: Msg, then the cause when there is one.
func (e *Error) Detail() string {
	switch {
	case e.Err == nil:
		return e.Msg
	case e.Msg == "":
		return e.Err.Error()
	}
	return e.Msg + ": " + e.Err.Error()
}

// Public is the message a client may see: "field PATH: DETAIL".
func (e *Error) Public() string {
	if e.Path == "" {
		return e.Detail()
	}
	return "field " + e.Path + ": " + e.Detail()
}

// Error is Public prefixed by the kind: "KIND: field PATH: DETAIL".
func (e *Error) Error() string {
	if e.Kind == nil {
		return e.Public()
	}
	return e.Kind.Error() + ": " + e.Public()
}

// Unwrap exposes the kind, the cause and, for an error moved by Under, the
// original field error.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 3)
	for _, x := range []error{e.Kind, e.Err} {
		if x != nil {
			out = append(out, x)
		}
	}
	if e.inner != nil {
		out = append(out, e.inner)
	}
	return out
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// Under moves the field error in err under the field prefix: its path
// becomes prefix.path (prefix[i] for an index). A non-nil kind replaces
// the error's kind; the original error stays in the chain, so its kind
// still matches. An err holding no *Error becomes an error of kind on
// prefix itself. Under(_, _, nil) is nil.
func Under(kind error, prefix string, err error) error {
	if err == nil {
		return nil
	}
	fe, ok := As(err)
	if !ok {
		return Wrap(kind, prefix, err)
	}
	out := &Error{Path: Join(prefix, fe.Path), Msg: fe.Msg, Kind: fe.Kind, Err: fe.Err, Setting: fe.Setting, inner: fe}
	if kind != nil {
		out.Kind = kind
	}
	return out
}

// Join appends path to prefix: a dot between names, none before an index.
func Join(prefix, path string) string {
	switch {
	case prefix == "":
		return path
	case path == "":
		return prefix
	case strings.HasPrefix(path, "["):
		return prefix + path
	}
	return prefix + "." + path
}

// Index is the path of element i of the list at path: "path[i]".
func Index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
