/**
 * Grammar of the l7c policy language: Copper-like policies (act/using/context headers,
 * [Ingress]/[Egress] sections, action calls) plus the declarations a data plane needs
 * (services, upstreams, the fallback proxy) and the interface files (*.l7i) that declare
 * act types, state types and their fields and actions.
 */

const PREC = {
  or: 1,
  and: 2,
  compare: 3,
  not: 4,
  call: 5,
  member: 6,
};

const commaSep = (rule) => optional(seq(rule, repeat(seq(',', rule)), optional(',')));

module.exports = grammar({
  name: 'l7',

  extras: ($) => [/\s/, $.comment],
  word: ($) => $.identifier,

  rules: {
    source_file: ($) => repeat($._item),

    _item: ($) => choice(
      $.import_declaration,
      $.service_declaration,
      $.upstream_declaration,
      $.fallback_declaration,
      $.policy_definition,
      $.policy_separator,
      $.act_declaration,
      $.state_declaration,
      $.instance_declaration,
      $.identity_declaration,
    ),

    import_declaration: ($) => seq('import', field('path', $.string), ';'),

    // service frontend = 127.0.0.1:8080;  (what clients connect to)
    service_declaration: ($) => seq('service', field('name', $.identifier), '=', field('address', $.address), ';'),

    // upstream api = 127.0.0.1:9001;   upstream pool = [127.0.0.1:9001 weight 2, 127.0.0.1:9002];
    // upstream users = [127.0.0.1:9001, 127.0.0.1:9002] balance hash(header "x-user");
    upstream_declaration: ($) => seq('upstream', field('name', $.identifier), '=',
      field('targets', choice($.endpoint, seq('[', commaSep($.endpoint), ']'), $.endpoint_name, $.endpoint_set)),
      repeat(choice(field('balance', $.balance), field('health', $.health), field('retries', $.retries))), ';'),
    // endpoints l7run finds at run time: a DNS name it resolves, or a set it reads from its
    // --endpoints file.  upstream api = "api.default.svc:8080";  upstream api = endpoints("api");
    endpoint_name: ($) => field('name', $.string),
    endpoint_set: ($) => seq('endpoints', '(', field('name', $.string), ')'),
    endpoint: ($) => seq(field('address', $.address), optional(seq('weight', field('weight', $.integer)))),
    // balance round_robin | balance hash(path) | hash(source) | hash(header "name"). The policy
    // and key kinds are identifiers, checked by the front end (a misspelling gets a message
    // naming the choices, not a syntax error).
    balance: ($) => seq('balance', field('policy', $.identifier),
      optional(seq('(', optional(field('key', $.balance_key)), ')'))),
    balance_key: ($) => seq(field('kind', $.identifier), optional(field('name', $.string))),
    // health "/healthz" every 2s timeout 1s unhealthy 3 healthy 2 status 200..399 host "api": active
    // checks l7run sends to each endpoint; retries 1: connect failures of idempotent requests
    // tried again on another endpoint. Option names are identifiers the front end checks.
    health: ($) => seq('health', field('path', $.string), repeat(field('option', $.health_option))),
    health_option: ($) => seq(field('name', $.identifier), field('value', choice($.duration, $.integer, $.range, $.string))),
    retries: ($) => seq('retries', field('count', $.integer)),

    // fallback proxy = 127.0.0.1:15001;  (the userspace proxy of the slow path)
    fallback_declaration: ($) => seq('fallback', field('name', $.identifier), '=', field('address', $.address), ';'),

    // identity login = [10.0.1.0/24, 10.0.2.7];  (callers, for context patterns)
    identity_declaration: ($) => seq('identity', field('name', $.identifier), '=',
      field('addresses', choice($.cidr, $.ip, seq('[', commaSep(choice($.cidr, $.ip)), ']'))), ';'),

    // Jwt auth { key_file = "hs256.key"; issuer = "https://id.example"; }  (a state instance
    // with its settings; policies bind it with `using (Jwt auth)`)
    instance_declaration: ($) => seq(field('type', $.identifier), field('name', $.identifier),
      '{', repeat($.setting), '}'),
    setting: ($) => seq(field('name', $.identifier), '=', field('value', $._expression), ';'),

    policy_separator: (_) => '---',

    policy_definition: ($) => seq(
      'policy', field('name', $.identifier),
      '(', repeat($._policy_header_item), ')',
      field('body', $.block),
    ),
    _policy_header_item: ($) => choice($.act_binding, $.using_binding, $.context_binding),
    act_binding: ($) => seq('act', '(', field('type', $.identifier), field('name', $.identifier), ')'),
    using_binding: ($) => seq('using', '(', field('type', $.identifier), field('name', $.identifier), ')'),
    context_binding: ($) => seq('context', '(', field('pattern', $.string), ')'),

    // ---- statements ----
    _statement: ($) => choice($.section_tag, $.action_statement, $.if_statement, $.block),
    section_tag: ($) => seq('[', field('name', $.identifier), ']'),
    action_statement: ($) => seq(field('call', $.call_expression), ';'),
    if_statement: ($) => prec.right(seq(
      'if', '(', field('condition', $._expression), ')',
      field('consequence', $._statement),
      optional(seq('else', field('alternative', $._statement))),
    )),
    block: ($) => seq('{', repeat($._statement), '}'),

    // ---- expressions ----
    _expression: ($) => choice(
      $.binary_expression, $.unary_expression, $.call_expression, $.member_expression,
      $.parenthesized_expression, $.list, $.range,
      $.identifier, $.string, $.integer, $.ip, $.cidr, $.address, $.boolean,
    ),
    binary_expression: ($) => choice(
      prec.left(PREC.or, seq(field('left', $._expression), field('operator', '||'), field('right', $._expression))),
      prec.left(PREC.and, seq(field('left', $._expression), field('operator', '&&'), field('right', $._expression))),
      ...['==', '!=', '<', '<=', '>', '>=', 'in'].map((op) =>
        prec.left(PREC.compare, seq(field('left', $._expression), field('operator', op), field('right', $._expression)))),
    ),
    unary_expression: ($) => prec(PREC.not, seq(field('operator', '!'), field('operand', $._expression))),
    call_expression: ($) => prec(PREC.call, seq(
      field('function', choice($.identifier, $.member_expression)),
      field('arguments', $.arguments),
    )),
    arguments: ($) => seq('(', commaSep($._expression), ')'),
    member_expression: ($) => prec(PREC.member, seq(field('object', choice($.identifier, $.member_expression, $.call_expression)), '.', field('field', $.identifier))),
    parenthesized_expression: ($) => seq('(', $._expression, ')'),
    list: ($) => seq('[', commaSep($._expression), ']'),
    range: ($) => seq(field('low', $.integer), '..', field('high', $.integer)),

    // ---- interface files (*.l7i) ----
    // act HttpRequest { field path: string; action Route(self, upstream to) = route; }
    act_declaration: ($) => seq('act', field('name', $.identifier),
      optional(seq(':', field('base', $.identifier))), '{', repeat($._member), '}'),
    state_declaration: ($) => seq('state', field('name', $.identifier), '{', repeat($._member), '}'),
    _member: ($) => choice($.field_declaration, $.action_declaration),
    field_declaration: ($) => seq('field', field('name', $.identifier),
      optional(field('parameters', $.parameters)), ':', field('type', $.identifier),
      optional(seq('=', field('intrinsic', $.identifier))), ';'),
    action_declaration: ($) => seq(repeat(field('tag', $.section_tag)), 'action', field('name', $.identifier),
      field('parameters', $.parameters), optional(seq('=', field('intrinsic', $.identifier))), ';'),
    parameters: ($) => seq('(', commaSep(choice($.self, $.parameter)), ')'),
    self: (_) => 'self',
    parameter: ($) => seq(field('type', $.identifier), field('name', $.identifier)),

    // ---- tokens ----
    identifier: (_) => /[A-Za-z_][A-Za-z0-9_]*/,
    integer: (_) => /[0-9]+/,
    duration: (_) => token(prec(1, /[0-9]+(ms|s|m)/)),
    boolean: (_) => choice('true', 'false'),
    // Addresses lex as single tokens so that 10.0.0.1 is never read as numbers and dots.
    ip: (_) => token(prec(2, /[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}/)),
    cidr: (_) => token(prec(2, /[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\/[0-9]{1,2}/)),
    address: (_) => token(prec(2, /[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}:[0-9]{1,5}/)),
    string: ($) => choice(
      seq('"', repeat(choice(token.immediate(prec(1, /[^"\\\n]+/)), $._escape)), '"'),
      seq("'", repeat(choice(token.immediate(prec(1, /[^'\\\n]+/)), $._escape)), "'"),
    ),
    _escape: (_) => token.immediate(/\\[\\"'nrt0]/),
    comment: (_) => token(choice(seq('//', /[^\n]*/), seq('/*', /[^*]*\*+([^/*][^*]*\*+)*/, '/'))),
  },
});
