package testkit

import (
	"bytes"
	"strings"
)

// Archive is a txtar archive (the format of golang.org/x/tools/txtar): a
// comment, then files, each introduced by a line "-- NAME --".
type Archive struct {
	Comment []byte
	Files   []File
}

// File is one file of an [Archive].
type File struct {
	Name string
	Data []byte
}

// ParseTxtar reads a txtar archive. It never fails: text before the first
// marker is the comment, and a marker line is any "-- NAME --" line.
func ParseTxtar(data []byte) *Archive {
	a := &Archive{}
	var cur *File
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		if name, ok := marker(line); ok {
			a.Files = append(a.Files, File{Name: name})
			cur = &a.Files[len(a.Files)-1]
			continue
		}
		if cur == nil {
			a.Comment = append(a.Comment, line...)
			a.Comment = append(a.Comment, '\n')
		} else {
			cur.Data = append(cur.Data, line...)
			cur.Data = append(cur.Data, '\n')
		}
	}
	return a
}

func marker(line []byte) (string, bool) {
	s := string(line)
	if !strings.HasPrefix(s, "-- ") || !strings.HasSuffix(s, " --") || len(s) < 7 {
		return "", false
	}
	return strings.TrimSpace(s[3 : len(s)-3]), true
}

// Format writes the archive back; each file's data ends with a newline.
func (a *Archive) Format() []byte {
	var b bytes.Buffer
	b.Write(a.Comment)
	for _, f := range a.Files {
		b.WriteString("-- " + f.Name + " --\n")
		b.Write(f.Data)
		if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}
