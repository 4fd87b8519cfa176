import pytest

from simcluster.apiserver.selectors import FieldSelector, LabelSelector, SelectorError

LABELS = {"app": "web", "tier": "frontend", "example.com/team": "blue", "version": "10"}


def sel(text: str) -> LabelSelector:
    return LabelSelector.parse(text)


# ---------------------------------------------------------------- label selectors


@pytest.mark.parametrize("text", [None, "", "   "])
def test_empty_label_selector_matches_everything(text):
    s = LabelSelector.parse(text)
    assert s.empty()
    assert s.matches(LABELS)
    assert s.matches({})
    assert s.matches(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app=web", True),
        ("app=api", False),
        ("app==web", True),
        ("app==api", False),
        ("app!=api", True),
        ("app!=web", False),
        ("missing!=x", True),  # != matches objects lacking the label
        ("missing=x", False),
        ("app in (api,web)", True),
        ("app in (api,db)", False),
        ("missing in (a)", False),
        ("app notin (api,db)", True),
        ("app notin (web,db)", False),
        ("missing notin (a,b)", True),  # notin matches objects lacking the label
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("version>9", True),
        ("version>10", False),
        ("version<11", True),
        ("version<10", False),
        ("app>1", False),  # non-integer label value never satisfies gt/lt
        ("missing>1", False),
        ("example.com/team=blue", True),
        ("example.com/team!=blue", False),
        ("app=web,tier=frontend", True),
        ("app=web,tier=backend", False),
        ("app=web,!missing,tier in (frontend),version", True),
    ],
)
def test_label_operators(text, expected):
    assert sel(text).matches(LABELS) is expected


def test_label_empty_value_forms():
    assert sel("app=").matches({"app": ""})
    assert not sel("app=").matches({"app": "x"})
    assert not sel("app=").matches({})
    assert sel("app!=").matches({"app": "x"})
    assert sel("app in ()").matches({"app": ""})
    assert sel("app in (,a)").matches({"app": ""})
    assert sel("app in (a,)").matches({"app": "a"})
    assert sel("app in (a,,b)").matches({"app": ""})


@pytest.mark.parametrize(
    "text",
    [
        "app = web",
        " app=web ",
        "app\t==\tweb",
        "app in(web,api)",
        "app in ( web , api )",
        "app=web ,tier=frontend",
        "! missing",
        "app notin(db)",
    ],
)
def test_label_whitespace_tolerated(text):
    assert sel(text).matches(LABELS)


def test_keywords_are_identifiers_in_value_position():
    s = sel("in in (in,notin)")
    assert s.matches({"in": "notin"})
    assert not s.matches({"in": "x"})


def test_label_selector_string_form_is_canonical():
    assert str(sel("b=2, a in (y,x), !c, d,e notin (),f>3")) == "a in (x,y),b=2,!c,d,e notin (),f>3"


def test_label_matches_none_labels():
    assert not sel("app=web").matches(None)
    assert sel("!app").matches(None)
    assert sel("app!=web").matches(None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("env IN (a)", "unable to parse requirement: found 'IN', expected: in, notin, =, ==, !=, gt, lt"),
        ("app=(", "unable to parse requirement: found '(', expected: identifier"),
        ("x=====y", "unable to parse requirement: found '==', expected: identifier"),
        ("app in web", "unable to parse requirement: found 'web' expected: '('"),
        ("app in (a b)", "unable to parse requirement: found 'b', expected: ',' or ')'"),
        ("app in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        ("app=web,", "found '', expected: identifier after ','"),
        (",app", "found ',', expected: !, identifier, or 'end of string'"),
        ("app=a b", "found 'b', expected: ',' or 'end of string'"),
        ("!app=x", "found '=', expected: ',' or 'end of string'"),
        (
            "k<abc",
            'unable to parse requirement: values[0]: Invalid value: "abc": '
            "for 'Gt', 'Lt' operators, the value must be an integer",
        ),
    ],
)
def test_label_syntax_errors(text, message):
    with pytest.raises(SelectorError) as exc:
        sel(text)
    assert str(exc.value) == message


def test_label_key_validation_message_matches_apiserver():
    with pytest.raises(SelectorError) as exc:
        sel("app:monolith")
    assert str(exc.value) == (
        'unable to parse requirement: <nil>: Invalid value: "app:monolith": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    )


def test_label_key_prefix_must_be_dns_subdomain():
    with pytest.raises(SelectorError, match="prefix part a lowercase RFC 1123 subdomain"):
        sel("app.kubernetes_io/name=x")
    with pytest.raises(SelectorError, match="a qualified name must consist"):
        sel("a/b/c=x")
    with pytest.raises(SelectorError, match="prefix part must be non-empty"):
        sel("/name=x")
    with pytest.raises(SelectorError, match="name part must be no more than 63 characters"):
        sel("k" * 64)
    assert sel("k" * 63).matches({"k" * 63: "v"})


def test_label_value_validation():
    with pytest.raises(SelectorError) as exc:
        sel("app=-bad")
    assert str(exc.value).startswith(
        'unable to parse requirement: values[0][app]: Invalid value: "-bad": a valid label must be an empty '
        "string or consist of alphanumeric characters"
    )
    with pytest.raises(SelectorError, match="must be no more than 63 characters"):
        sel("app=" + "v" * 64)
    with pytest.raises(SelectorError, match=r"values\[1\]\[app\]"):
        sel("app in (a,b_,c)")
    assert sel("app=" + "v" * 63).matches({"app": "v" * 63})
    assert sel("app=A.b-c_9").matches({"app": "A.b-c_9"})


def test_from_match_labels_and_expressions():
    s = LabelSelector.from_match(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "version", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    assert not s.empty()
    assert s.matches(LABELS)
    assert not s.matches({**LABELS, "legacy": "1"})
    assert not s.matches({**LABELS, "env": "prod"})
    assert not s.matches({**LABELS, "tier": "backend"})
    assert not s.matches({k: v for k, v in LABELS.items() if k != "version"})
    assert str(s) == "app=web,env notin (prod),!legacy,tier in (edge,frontend),version"


def test_from_match_empty_and_none():
    assert LabelSelector.from_match({}).empty()
    assert LabelSelector.from_match({"matchLabels": {}, "matchExpressions": []}).matches({"x": "y"})
    nothing = LabelSelector.from_match(None)
    assert not nothing.empty()
    assert not nothing.matches({})
    assert not nothing.matches(LABELS)


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]},
            '"Equals" is not a valid label selector operator',
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
        ),
    ],
)
def test_from_match_errors(selector, message):
    with pytest.raises(SelectorError) as exc:
        LabelSelector.from_match(selector)
    assert str(exc.value) == message


def test_from_match_rejects_bad_key_and_value():
    with pytest.raises(SelectorError, match=r'^key: Invalid value: "-a"'):
        LabelSelector.from_match({"matchLabels": {"-a": "b"}})
    with pytest.raises(SelectorError, match=r'^values\[0\]\[a\]: Invalid value: "b b"'):
        LabelSelector.from_match({"matchLabels": {"a": "b b"}})


def test_requires_exact_match():
    assert sel("app=web,tier in (a,b)").requires_exact_match("app") == "web"
    assert sel("app in (web)").requires_exact_match("app") == "web"
    assert sel("tier in (a,b)").requires_exact_match("tier") is None
    assert sel("app!=web").requires_exact_match("app") is None


def test_label_selector_is_hashable_and_comparable():
    assert sel("a=b,c") == sel("c, a=b")
    assert sel("a=b") != sel("a==b")  # the operator spelling is kept, as upstream
    assert len({sel("a=b"), sel(" a = b ")}) == 1


def test_label_selector_bulk_matching():
    objs = [{"app": f"a{i % 5}", "tier": "web" if i % 2 else "db"} for i in range(1000)]
    s = sel("app in (a1,a3),tier!=db")
    assert sum(s.matches(o) for o in objs) == 200


# ---------------------------------------------------------------- field selectors

POD = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"nodeName": "node-a", "schedulerName": "default-scheduler", "hostNetwork": True, "priority": 5},
    "status": {"phase": "Running"},
}
UNSCHEDULED = {
    "metadata": {"name": "web-2", "namespace": "default"},
    "spec": {},
    "status": {"phase": "Pending"},
}
EVENT = {
    "metadata": {"name": "e1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "web-1"},
}


@pytest.mark.parametrize("text", [None, "", ","])
def test_empty_field_selector(text):
    fs = FieldSelector.parse(text)
    assert fs.empty()
    assert fs.requirements() == []
    assert fs.matches(POD)


@pytest.mark.parametrize(
    ("text", "obj", "expected"),
    [
        ("metadata.name=web-1", POD, True),
        ("metadata.name==web-1", POD, True),
        ("metadata.name=web-2", POD, False),
        ("metadata.name!=web-2", POD, True),
        ("metadata.name!=web-1", POD, False),
        ("metadata.namespace=default", POD, True),
        ("spec.nodeName=node-a", POD, True),
        ("spec.nodeName=", UNSCHEDULED, True),  # missing field reads as ""
        ("spec.nodeName=", POD, False),
        ("spec.nodeName!=", POD, True),
        ("spec.nodeName!=", UNSCHEDULED, False),
        ("status.phase=Running", POD, True),
        ("status.phase!=Running,status.phase!=Succeeded", UNSCHEDULED, True),
        ("status.phase!=Running,status.phase!=Succeeded", POD, False),
        ("spec.schedulerName=default-scheduler", POD, True),
        ("spec.hostNetwork=true", POD, True),
        ("spec.priority=5", POD, True),
        ("spec=x", POD, False),  # maps never equal a value
        ("spec!=x", POD, True),
        ("involvedObject.name=web-1,involvedObject.kind=Pod", EVENT, True),
        ("involvedObject.name=web-2", EVENT, False),
        ("metadata.name.extra=", POD, True),  # walking past a scalar reads as ""
    ],
)
def test_field_operators(text, obj, expected):
    assert FieldSelector.parse(text).matches(obj) is expected


def test_field_requirements_are_normalized_and_sorted():
    fs = FieldSelector.parse("status.phase==Running,metadata.name!=x")
    assert fs.requirements() == [("metadata.name", "!=", "x"), ("status.phase", "=", "Running")]
    assert str(fs) == "metadata.name!=x,status.phase=Running"
    assert fs.requires_exact_match("status.phase") == "Running"
    assert fs.requires_exact_match("metadata.name") is None


def test_field_value_escapes():
    fs = FieldSelector.parse(r"metadata.name=a\,b\=c\\d")
    assert fs.requirements() == [("metadata.name", "=", "a,b=c\\d")]
    assert fs.matches({"metadata": {"name": "a,b=c\\d"}})
    assert not fs.matches({"metadata": {"name": "a"}})
    assert str(fs) == r"metadata.name=a\,b\=c\\d"
    # an escaped comma does not split terms
    assert len(FieldSelector.parse(r"metadata.name=a\,b,status.phase=x").requirements()) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: 61"),
        ("metadata.name!==x", "invalid field selector: unescaped character in value: 61"),
        (r"metadata.name=a\x", "invalid field selector: invalid escape sequence: \\x"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
    ],
)
def test_field_syntax_errors(text, message):
    with pytest.raises(SelectorError) as exc:
        FieldSelector.parse(text)
    assert str(exc.value) == message


def test_field_allowed_list():
    allowed = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}
    assert FieldSelector.parse("spec.nodeName=n,status.phase=Running", allowed).matches(
        {"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}
    )
    with pytest.raises(SelectorError) as exc:
        FieldSelector.parse("spec.restartPolicy=Always", allowed)
    assert str(exc.value) == "field label not supported: spec.restartPolicy"
    with pytest.raises(SelectorError, match=r"^field label not supported: metadata.name $"):
        FieldSelector.parse("metadata.name = x", allowed)  # no whitespace trimming, as upstream


def test_field_selector_bulk_matching():
    objs = [{"spec": {"nodeName": f"n{i % 4}"} if i % 2 else {}} for i in range(1000)]
    assert sum(FieldSelector.parse("spec.nodeName=").matches(o) for o in objs) == 500
    assert sum(FieldSelector.parse("spec.nodeName=n1").matches(o) for o in objs) == 250
