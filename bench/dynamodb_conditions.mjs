// DynamoDB's errors and condition expressions for dynamodb_standin.mjs: OR, AND, NOT, parentheses, attribute_exists,
// attribute_not_exists, = <> < <= > >= over #names, :values and plain names (N compared as numbers, S as strings).

export class Failure extends Error {
  constructor(code, message, extra = {}) {
    super(message);
    this.code = code;
    this.extra = extra;
  }
}

const tokenized = new Map(); // the daemon sends a few expressions, each thousands of times: split once
const tokenize = (text) => tokenized.get(text)
  ?? tokenized.set(text, text.match(/\(|\)|,|<>|<=|>=|=|<|>|[#:]?[A-Za-z0-9_.\-]+/g) ?? []).get(text);

function evaluate(text, item, names = {}, values = {}) {
  const tokens = tokenize(text);
  let at = 0;
  const peek = () => tokens[at];
  const take = (want) => {
    const token = tokens[at++];
    if (want !== undefined && token !== want) throw new Failure("ValidationException", `condition: expected ${want} in ${text}`);
    return token;
  };
  const operand = () => {
    const token = take();
    if (token.startsWith(":")) return values[token];
    return item?.[token.startsWith("#") ? names[token] : token];
  };
  const compare = (a, op, b) => {
    if (a === undefined || b === undefined) return op === "<>";
    const [x, y] = "N" in a && "N" in b ? [Number(a.N), Number(b.N)] : [a.S ?? JSON.stringify(a), b.S ?? JSON.stringify(b)];
    return { "=": x === y, "<>": x !== y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y }[op];
  };
  const term = () => {
    const token = peek();
    if (token?.toUpperCase() === "NOT") return take(), !term();
    if (token === "(") {
      take();
      const value = or();
      take(")");
      return value;
    }
    if (token === "attribute_exists" || token === "attribute_not_exists") {
      take();
      take("(");
      const present = operand() !== undefined;
      take(")");
      return token === "attribute_exists" ? present : !present;
    }
    const left = operand();
    const op = take();
    if (!["=", "<>", "<", "<=", ">", ">="].includes(op)) throw new Failure("ValidationException", `condition: ${op}?`);
    return compare(left, op, operand());
  };
  const and = () => {
    let value = term();
    while (peek()?.toUpperCase() === "AND") take(), (value = term() && value);
    return value;
  };
  const or = () => {
    let value = and();
    while (peek()?.toUpperCase() === "OR") take(), (value = and() || value);
    return value;
  };
  const value = or();
  if (at !== tokens.length) throw new Failure("ValidationException", `condition: unexpected ${peek()} in ${text}`);
  return value;
}

export function holds(request, item) {
  const expression = request.ConditionExpression;
  return expression === undefined || evaluate(expression, item, request.ExpressionAttributeNames,
    request.ExpressionAttributeValues);
}
