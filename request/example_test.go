package request_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/request"
)

func Example() {
	// Every spelling of one request comes to one form...
	for _, s := range [][3]string{
		{"POST", "/login", "api.example.com"},
		{"post", "//%6Cogin/", "API.example.com.:8443"},
		{"pOsT", "/static/../login", "api.example.com"},
	} {
		c, err := request.New(s[0], s[1], s[2])
		fmt.Println(c, err)
	}
	// ...and what has none is malformed: answer 400.
	_, err := request.New("POST", "/login", "api.example.com..")
	fmt.Println(err, errors.Is(err, request.ErrMalformed))
	// Output:
	// {POST api.example.com /login} <nil>
	// {POST api.example.com /login} <nil>
	// {POST api.example.com /login} <nil>
	// malformed request: host: empty label true
}

func ExamplePathSemantics_Fold() {
	// Spellings that a case-insensitive or servlet application serves as
	// /login fold to /login; strict folds nothing.
	for _, p := range []string{"/LOGIN", "/login;jsessionid=1", "/login%20"} {
		c, _ := request.Path(p)
		fmt.Println(p, request.PathStrict.Fold(c), request.PathCaseInsensitive.Fold(c), request.PathServlet.Fold(c))
	}
	// Output:
	// /LOGIN /LOGIN /login /LOGIN
	// /login;jsessionid=1 /login;jsessionid=1 /login;jsessionid=1 /login
	// /login%20 /login%20 /login%20 /login
}
