package redact_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redact"
)

// Every secret of every form is masked, and nothing else changes.
func TestURLMasksEverySecret(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"memory", "memory"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"postgres://u:pw@host/db?password=X", "postgres://u:xxxxx@host/db?password=xxxxx"},
		{"postgresql://u@host/db?sslmode=require&sslpassword=Y&application_name=a", "postgresql://u@host/db?sslmode=require&sslpassword=xxxxx&application_name=a"},
		{"postgres://host/db?PassWord=X&passfile=/etc/p", "postgres://host/db?PassWord=xxxxx&passfile=xxxxx"},
		{"redis://:pw@host:6379/0", "redis://:xxxxx@host:6379/0"},
		{"rediss://default:p%40ss@host", "rediss://default:xxxxx@host"},
		{"redis+sentinel://:pw@s1:26379,s2:26379/mymaster?sentinel_password=SP", "redis+sentinel://:xxxxx@s1:26379,s2:26379/mymaster?sentinel_password=xxxxx"},
		{"redis://:p@ss/word@host/0", "redis://:xxxxx@host/0"}, // unescaped '@' and '/' in the password
		{"http://app.test/x?token=T&access_token=A&auth=B&secret=C&key=D&api-key=E&X-Amz-Signature=F&page=2", "http://app.test/x?token=xxxxx&access_token=xxxxx&auth=xxxxx&secret=xxxxx&key=xxxxx&api-key=xxxxx&X-Amz-Signature=xxxxx&page=2"},
		{"http://app.test/x?a=1#frag", "http://app.test/x?a=1#frag"},
		{"host=db user=u password=X dbname=d", "host=db user=u password=xxxxx dbname=d"},
		{"host=db password = 'a b\\' c' sslpassword=Y", "host=db password = xxxxx sslpassword=xxxxx"},
		{"user=u", "user=u"},
		// The separators stay as written: only secrets change.
		{"http://app.test/x?a=1;b=2&&c=3&", "http://app.test/x?a=1;b=2&&c=3&"},
		{"http://app.test/x?a=1;token=T&&c=3", "http://app.test/x?a=1;token=xxxxx&&c=3"},
	} {
		if got := redact.URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// An error a client library made from a connection string keeps its
// chain but loses every secret, however the library echoed it.
func TestErrorMasksEchoedSecrets(t *testing.T) {
	conn := "postgres://u:p%40ss@db/x?password=Q7q&sslpassword=Z9z"
	err := errors.Join(fs.ErrNotExist, errors.New("cannot connect to "+conn+": bad password p@ss for Q7q (Z9z)"))
	got := redact.Error(err, conn)
	if !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("the masked error lost its chain")
	}
	for _, s := range []string{"p@ss", "p%40ss", "Q7q", "Z9z"} {
		if strings.Contains(got.Error(), s) {
			t.Errorf("%q still in %q", s, got.Error())
		}
	}
	if !strings.Contains(got.Error(), "postgres://u:xxxxx@db/x?password=xxxxx&sslpassword=xxxxx") {
		t.Errorf("the URL is not shown masked: %q", got.Error())
	}
	plain := errors.New("connection refused")
	if redact.Error(plain, conn) != plain || redact.Error(nil, conn) != nil {
		t.Errorf("an error without secrets, or nil, is not returned as it is")
	}
}
