// Package redact masks the secrets in connection strings before they are
// printed: in logs, banners, error messages and the admin page. It is the
// one place that decides what a secret is, so that every face prints the
// same masked form.
//
// What is masked, with Mask in its place:
//
//   - a URL's password (scheme://user:PASSWORD@host…; redis://:PASSWORD@,
//     rediss://, redis+sentinel:// and the like alike), found up to the
//     last '@' before the query, so that an unescaped '@' or '/' in the
//     password is masked with it;
//   - the value of each query parameter (scheme://…?name=VALUE) whose name
//     is a secret's;
//   - in a connection string that is not a URL (PostgreSQL's key=value
//     form, "host=db user=u password=VALUE"), the value, quoted or not, of
//     each key that is a secret's.
//
// A name is a secret's when, compared in lower case, it contains one of
// "pass" (password, sslpassword, passphrase, passfile), "pwd", "secret",
// "token" (token, access_token), "auth", "key" (key, api_key, sslkey),
// "sig" (sig, signature) or "credential". The list errs towards masking:
// a path (passfile, sslkey) is masked with the secrets, since its value
// says where one is.
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package redact

import (
	"net/url"
	"strings"
)

// Mask is what stands in place of a secret.
const Mask = "xxxxx"

// secretWords are the parts of a parameter name that make its value a
// secret (see the package documentation).
var secretWords = []string{"pass", "pwd", "secret", "token", "auth", "key", "sig", "credential"}

// SecretName reports whether a query parameter or connection-string key of
// this name holds a secret.
func SecretName(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// URL returns s, a URL or a key=value connection string, with every secret
// in it replaced by Mask, and the rest as it was written (not re-encoded).
// A string with neither form's secrets comes back unchanged.
func URL(s string) string {
	out, _ := scan(s)
	return out
}

// Secrets returns the secrets of s (see URL), each as written and, where
// it differs, percent-decoded: what an error message that echoes s or
// parts of it may show.
func Secrets(s string) []string {
	_, secrets := scan(s)
	var all []string
	for _, v := range secrets {
		if v == "" {
			continue
		}
		all = append(all, v)
		if u, err := url.PathUnescape(v); err == nil && u != v && u != "" {
			all = append(all, u)
		}
		if u, err := url.QueryUnescape(v); err == nil && u != v && u != "" {
			all = append(all, u)
		}
	}
	return all
}

// Text returns msg with every secret of conn (see Secrets) replaced by
// Mask, and any copy of conn itself by URL(conn).
func Text(msg, conn string) string {
	if conn == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, conn, URL(conn))
	for _, v := range Secrets(conn) {
		msg = strings.ReplaceAll(msg, v, Mask)
	}
	return msg
}

// Error returns err with its message passed through Text(…, conn), for
// errors a client library made from conn (which may echo it); errors.Is
// and errors.As still see err. A nil err is nil; an err whose message
// holds no secret of conn is returned as it is.
func Error(err error, conn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if m := Text(msg, conn); m != msg {
		return &maskedError{msg: m, err: err}
	}
	return err
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// scan masks s and collects the secrets it masked.
func scan(s string) (string, []string) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(scheme, " =") {
		return keyValues(s)
	}
	var b strings.Builder
	var secrets []string
	b.Grow(len(s))
	b.WriteString(scheme)
	b.WriteString("://")
	query := len(rest)
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		query = i
	}
	if at := strings.LastIndex(rest[:query], "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		b.WriteString(user)
		if hasPass {
			b.WriteString(":" + Mask)
			secrets = append(secrets, pass)
		}
		rest = rest[at:]
		query -= at
	}
	b.WriteString(rest[:query])
	rest = rest[query:]
	if !strings.HasPrefix(rest, "?") {
		b.WriteString(rest)
		return b.String(), secrets
	}
	b.WriteByte('?')
	rest = rest[1:]
	frag := ""
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest, frag = rest[:i], rest[i:]
	}
	// Each parameter ends at '&' or ';'; the separators are kept as
	// written, so only the secrets' values change.
	for rest != "" {
		param := rest
		sep := ""
		if j := strings.IndexAny(rest, "&;"); j >= 0 {
			param, sep = rest[:j], rest[j:j+1]
			rest = rest[j+1:]
		} else {
			rest = ""
		}
		name, value, hasValue := strings.Cut(param, "=")
		if hasValue && SecretName(name) {
			b.WriteString(name + "=" + Mask)
			secrets = append(secrets, value)
		} else {
			b.WriteString(param)
		}
		b.WriteString(sep)
	}
	b.WriteString(frag)
	return b.String(), secrets
}

// keyValues masks the secret values of a key=value connection string
// (PostgreSQL's: keys and values separated by '=' with optional spaces
// around it, values bare or in single quotes with backslash escapes), and
// collects them. Text that is not of that form is kept as it is.
func keyValues(s string) (string, []string) {
	var b strings.Builder
	var secrets []string
	i := 0
	for i < len(s) {
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			break
		}
		eq += i
		key := strings.TrimSpace(s[i:eq])
		if sp := strings.LastIndexAny(key, " \t\n"); sp >= 0 {
			key = key[sp+1:]
		}
		v := eq + 1
		for v < len(s) && (s[v] == ' ' || s[v] == '\t') {
			v++
		}
		end := v
		if end < len(s) && s[end] == '\'' {
			end++
			for end < len(s) && s[end] != '\'' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			end = min(end+1, len(s))
		} else {
			for end < len(s) && s[end] != ' ' && s[end] != '\t' && s[end] != '\n' {
				end++
			}
		}
		b.WriteString(s[i:v])
		if SecretName(key) && end > v {
			b.WriteString(Mask)
			val := s[v:end]
			secrets = append(secrets, val)
			if uq := strings.Trim(val, "'"); uq != val {
				secrets = append(secrets, strings.ReplaceAll(uq, `\'`, `'`))
			}
		} else {
			b.WriteString(s[v:end])
		}
		i = end
	}
	b.WriteString(s[i:])
	return b.String(), secrets
}
