package xdsconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
)

// TypeURL is the resource type the client subscribes to, envoyproxy/ratelimit's
// RateLimitConfig: one resource is one domain, as one file is.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// MaxResources is the most resources one response may carry; a response
// with more is refused (NACKed) before any is decoded. Each resource is a
// domain, and real control planes send a handful.
const MaxResources = 10_000

// maxRecursion bounds the nesting of a decoded resource: the config's 64
// descriptor levels, with room for a descriptor's metadata.
const maxRecursion = 200

// Names of the fields of RateLimitDescriptor that newer versions of the
// proto have (envoyproxy/ratelimit's rls_conf.proto) and the one this
// module is built with may lack: read from a descriptor's unknown fields by
// number, so that a control plane built with the newer proto is understood.
var newerDescriptorFields = map[protowire.Number]string{7: "quota_mode", 8: "metadata"}

// newerUnits names the RateLimitUnit values that newer versions of the
// proto have and older ones lack (an open enum keeps them as numbers).
var newerUnits = map[protoreflect.EnumNumber]string{5: "MONTH", 6: "YEAR", 7: "WEEK"}

// ResourceName is the name under which a resource's errors are reported,
// as a file's are under its path: "xds:" and the resource's name, or its
// position in the response (from 0) when it has none.
func ResourceName(r *rlconf.RateLimitConfig, i int) string {
	if r.GetName() != "" {
		return "xds:" + r.GetName()
	}
	return "xds:#" + strconv.Itoa(i)
}

// Compile turns one response's resources into a config the way the file
// loader turns a directory of files into one: each resource is rendered as
// the document a file holding it would (Document) and parsed by
// config.Parse under its ResourceName, and the domains are combined by
// opts.New (so MergeDomains applies as to files). So the two sources share
// one validation, one compiled form and one set of errors (*config.Error
// values naming the resource).
//
// Compile's work is bounded by the resources' bytes: more than
// MaxResources resources are refused before any is decoded, each rendered
// document by config.MaxFileBytes, and all of them together by
// config.MaxTotalBytes, as a config directory is. An empty list is a
// config of no domains.
func Compile(opts config.Options, resources []*anypb.Any) (*config.Config, error) {
	if len(resources) > MaxResources {
		return nil, fmt.Errorf("%d resources, over the limit of %d", len(resources), MaxResources)
	}
	// Every document is rendered before any is parsed, as the file loader
	// reads every file first, so that the total bounds what is parsed.
	names := make([]string, len(resources))
	docs := make([][]byte, len(resources))
	total := 0
	for i, a := range resources {
		r, err := decode(a)
		if err != nil {
			return nil, fmt.Errorf("resource #%d: %w", i, err)
		}
		names[i] = ResourceName(r, i)
		if docs[i], err = Document(r); err != nil {
			return nil, &config.Error{File: names[i], Msg: err.Error(), Err: err}
		}
		if total += len(docs[i]); total > config.MaxTotalBytes {
			return nil, &config.Error{File: names[i], Msg: fmt.Sprintf("%d bytes in all in the first %d of %d resources, over the limit of %d",
				total, i+1, len(resources), config.MaxTotalBytes)}
		}
	}
	domains := make([]*config.Domain, 0, len(resources))
	for i, doc := range docs {
		d, err := config.Parse(names[i], doc)
		docs[i] = nil
		if err != nil {
			return nil, err
		}
		domains = append(domains, d)
	}
	return opts.New(domains...)
}

// decode unmarshals one resource, which must be a RateLimitConfig.
func decode(a *anypb.Any) (*rlconf.RateLimitConfig, error) {
	if a.GetTypeUrl() != TypeURL {
		return nil, fmt.Errorf("type %q, want %q", a.GetTypeUrl(), TypeURL)
	}
	r := new(rlconf.RateLimitConfig)
	if err := (proto.UnmarshalOptions{RecursionLimit: maxRecursion}).Unmarshal(a.GetValue(), r); err != nil {
		return nil, fmt.Errorf("cannot decode: %w", err)
	}
	return r, nil
}

// errTooLarge is wrapped by Document's error for a document over
// config.MaxFileBytes.
var errTooLarge = errors.New("too large")

// Document renders r as the config document a file holding it would be:
// its domain and descriptors with their proto field names (the file
// format's keys), its units by name. r's name is not part of it (it names
// the document; see ResourceName). The document is JSON, which is YAML,
// with one descriptor per line so that a parse error's line points near
// the descriptor at fault.
//
// Every field set in r is rendered, those the config may not know
// included, so that a field Sluice does not act on is an error at parse
// (what a file with that key gets), never dropped. Fields this build's
// proto does not know are rendered by their names in newer versions of the
// proto (a descriptor's quota_mode and metadata) or refused. A document
// over config.MaxFileBytes is refused as soon as it grows past it.
func Document(r *rlconf.RateLimitConfig) ([]byte, error) {
	w := &docWriter{max: config.MaxFileBytes}
	if err := w.message(r.ProtoReflect(), true); err != nil {
		return nil, err
	}
	w.buf.WriteByte('\n')
	if w.buf.Len() > w.max {
		return nil, w.tooLarge()
	}
	return w.buf.Bytes(), nil
}

// docWriter writes a document, failing once it is over max bytes.
type docWriter struct {
	buf bytes.Buffer
	max int
}

func (w *docWriter) tooLarge() error {
	return fmt.Errorf("rendered as a config document it is over %d bytes: %w", w.max, errTooLarge)
}

// check fails once the document is over its limit.
func (w *docWriter) check() error {
	if w.buf.Len() > w.max {
		return w.tooLarge()
	}
	return nil
}

// message writes m as a JSON object of its set fields, in declaration
// order; top leaves out the resource's name.
func (w *docWriter) message(m protoreflect.Message, top bool) error {
	if err := w.check(); err != nil {
		return err
	}
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		return w.wellKnown(m.Interface())
	}
	w.buf.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) && !blockCount(m, fd) || top && fd.Name() == "name" {
			continue
		}
		comma()
		w.key(string(fd.Name()))
		if err := w.field(fd, m.Get(fd)); err != nil {
			return err
		}
	}
	if err := w.unknown(m, comma); err != nil {
		return err
	}
	w.buf.WriteByte('}')
	return w.check()
}

// blockCount reports whether fd is the requests_per_unit of a limited
// RateLimitPolicy: written even at 0, which proto3 does not mark present,
// since 0 blocks (as envoyproxy/ratelimit reads it) and a policy without
// it would be refused as missing one.
func blockCount(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	if fd.Name() != "requests_per_unit" || m.Descriptor().FullName() != "ratelimit.config.ratelimit.v3.RateLimitPolicy" {
		return false
	}
	u := m.Descriptor().Fields().ByName("unlimited")
	return u == nil || !m.Get(u).Bool()
}

// key writes a JSON key and its colon.
func (w *docWriter) key(k string) {
	w.string(k)
	w.buf.WriteByte(':')
}

// string writes s as a JSON string.
func (w *docWriter) string(s string) {
	b, _ := json.Marshal(s) // a string always marshals
	w.buf.Write(b)
}

// field writes the value v of field fd.
func (w *docWriter) field(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	if fd.IsMap() {
		return fmt.Errorf("field %s: maps are not supported", fd.FullName())
	}
	if !fd.IsList() {
		return w.single(fd, v)
	}
	l := v.List()
	w.buf.WriteByte('[')
	for i := range l.Len() {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if fd.Kind() == protoreflect.MessageKind {
			w.buf.WriteByte('\n') // one descriptor a line
		}
		if err := w.single(fd, l.Get(i)); err != nil {
			return err
		}
	}
	w.buf.WriteByte(']')
	return nil
}

// single writes one value of field fd.
func (w *docWriter) single(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return w.message(v.Message(), false)
	case protoreflect.StringKind:
		w.string(v.String())
	case protoreflect.BoolKind:
		w.buf.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.EnumKind:
		w.enum(fd.Enum(), v.Enum())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		w.buf.WriteString(strconv.FormatInt(v.Int(), 10))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		w.buf.WriteString(strconv.FormatUint(v.Uint(), 10))
	default:
		return fmt.Errorf("field %s: %s values are not supported", fd.FullName(), fd.Kind())
	}
	return nil
}

// enum writes an enum value by name: the proto's, or for a unit this
// build's proto lacks the newer proto's; an unnamed number as is, which
// the config then refuses.
func (w *docWriter) enum(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) {
	if vd := ed.Values().ByNumber(n); vd != nil {
		w.string(string(vd.Name()))
		return
	}
	if name, ok := newerUnits[n]; ok && ed.FullName() == "ratelimit.config.ratelimit.v3.RateLimitUnit" {
		w.string(name)
		return
	}
	w.buf.WriteString(strconv.FormatInt(int64(n), 10))
}

// wellKnown writes a google.protobuf.Struct, Value or ListValue as its
// JSON (metadata).
func (w *docWriter) wellKnown(m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	w.buf.Write(b)
	return w.check()
}

// unknown writes the fields of m that this build's proto does not know:
// a RateLimitDescriptor's newer fields by name (newerDescriptorFields);
// any other is an error, since dropping it would ignore what the control
// plane asked for.
func (w *docWriter) unknown(m protoreflect.Message, comma func()) error {
	raw := m.GetUnknown()
	isDesc := m.Descriptor().FullName() == "ratelimit.config.ratelimit.v3.RateLimitDescriptor"
	// The last occurrence of a field wins, as in proto decoding.
	var quota *bool
	var meta []byte
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return fmt.Errorf("%s: malformed unknown field", m.Descriptor().FullName())
		}
		raw = raw[n:]
		name, known := newerDescriptorFields[num]
		switch {
		case isDesc && known && name == "quota_mode" && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(raw)
			if n < 0 {
				return fmt.Errorf("%s: malformed quota_mode", m.Descriptor().FullName())
			}
			b := v != 0
			quota, raw = &b, raw[n:]
		case isDesc && known && name == "metadata" && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return fmt.Errorf("%s: malformed metadata", m.Descriptor().FullName())
			}
			meta, raw = v, raw[n:]
		default:
			return fmt.Errorf("%s: field %d is not known to this build of sluice", m.Descriptor().FullName(), num)
		}
	}
	if quota != nil {
		comma()
		w.key("quota_mode")
		w.buf.WriteString(strconv.FormatBool(*quota))
	}
	if meta != nil {
		s := new(structpb.Struct)
		if err := (proto.UnmarshalOptions{RecursionLimit: maxRecursion}).Unmarshal(meta, s); err != nil {
			return fmt.Errorf("%s: metadata: %w", m.Descriptor().FullName(), err)
		}
		comma()
		w.key("metadata")
		return w.wellKnown(s)
	}
	return nil
}
