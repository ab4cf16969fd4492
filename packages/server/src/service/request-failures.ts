// What the service answers when a request fails: a problem+json refusal, its own failure, or a request too broken to parse.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { PROBLEM_CONTENT_TYPE } from 'sluice/http';
import { errorText } from '../cli/errors.js';
import type { RequestLog } from './request-log.js';
import { Rejection } from './service-limit.js';

function sendProblem(response: ServerResponse, problem: Rejection): void {
  const text = `${JSON.stringify({ type: 'about:blank', title: problem.title, status: problem.status, detail: problem.message })}\n`;
  response.writeHead(problem.status, {
    ...problem.extraHeaders,
    'Content-Type': PROBLEM_CONTENT_TYPE,
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}

export function refuse(
  log: RequestLog,
  request: IncomingMessage,
  response: ServerResponse,
  rejection: Rejection,
): void {
  if (rejection.status < 500) log.refused(rejection.status);
  // A body left unread would hold the connection: the answer closes it instead.
  if (!request.complete) response.setHeader('Connection', 'close');
  sendProblem(response, rejection);
}

export function fail(
  log: RequestLog,
  request: IncomingMessage,
  response: ServerResponse,
  error: unknown,
): void {
  if (error instanceof Rejection) {
    refuse(log, request, response, error);
    return;
  }
  // The client went away in the middle of its request (node's "aborted"): not the service's failure.
  if (request.destroyed && (error as NodeJS.ErrnoException | undefined)?.code === 'ECONNRESET') return;
  log.failed(errorText(error));
  if (response.headersSent) response.end();
  else
    sendProblem(response, new Rejection(500, 'Internal Server Error', 'The service failed on this request.'));
}

export function clientError(log: RequestLog): (error: NodeJS.ErrnoException, socket: Duplex) => void {
  return (error, socket) => {
    // A connection its client reset (wrk and load balancers do, on every stop) is no request at all,
    // malformed or not, and there is no one to answer: it is closed, not counted.
    if (error.code === 'ECONNRESET' || error.code === 'EPIPE') {
      socket.destroy();
      return;
    }
    const [status, title] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request Header Fields Too Large']
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout']
          : [400, 'Bad Request'];
    log.refused(status);
    if (!socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const body = `${JSON.stringify({ type: 'about:blank', title, status, detail: 'The request could not be parsed as HTTP/1.1.' })}\n`;
    socket.end(
      `HTTP/1.1 ${status} ${title}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };
}
