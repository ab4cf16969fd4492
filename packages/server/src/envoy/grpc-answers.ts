// How a gRPC call is answered on its stream: one message and the OK trailers, or a status alone.
import { constants, type ServerHttp2Stream } from 'node:http2';
import { writeAtTurnEnd } from '../service/turn-end.js';
import { encodeMessage, frame } from './grpc-wire.js';

/** The response headers of every call that answers with messages. */
export const RESPONSE_HEADERS = {
  [constants.HTTP2_HEADER_STATUS]: 200,
  [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc+proto',
  'grpc-accept-encoding': 'identity',
};
const OK_TRAILERS = { 'grpc-status': '0' };

/** Ends a call without a message: the status in the headers ("trailers-only"), as gRPC answers an error. */
export function refuseCall(stream: ServerHttp2Stream, code: number, details: string): void {
  if (stream.destroyed || stream.headersSent) {
    if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  stream.respond(
    { ...RESPONSE_HEADERS, 'grpc-status': String(code), 'grpc-message': encodeMessage(details) },
    { endStream: true },
  );
}

/** Answers a unary call with its one message, then the OK status in the trailers. */
export function reply(stream: ServerHttp2Stream, message: Uint8Array): void {
  replyFramed(stream, frame(message));
}

/** `reply` with the message already framed: sent with the turn's other answers (see writeAtTurnEnd). */
export function replyFramed(stream: ServerHttp2Stream, framed: Buffer): void {
  if (stream.destroyed) return; // the caller went away (cancelled, or its deadline passed)
  writeAtTurnEnd(sendReply, stream, framed);
}

function sendReply(stream: ServerHttp2Stream, framed: Buffer): void {
  if (stream.destroyed || stream.headersSent) return; // gone, or refused meanwhile
  stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', sendOkTrailers);
  stream.end(framed);
}

function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}
