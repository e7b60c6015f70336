/* toss_errors.c -- the error-code table (data only).
 * Korean messages are Toss Payments' own, from its error-code reference
 * (docs.tosspayments.com/reference/error-codes) and its idempotency guide
 * (docs.tosspayments.com/reference/using-api/idempotency-key); entries marked [ours] are codes
 * or wordings Toss does not document, chosen by fakegate (docs/api.md §2.4). English messages are
 * fakegate's translations. Sorted by code so lookups are a binary search. */
#include "toss_errors.h"

#include <stdlib.h>
#include <string.h>

static const struct toss_error table[] = {
    {"ALREADY_CANCELED_PAYMENT", 400, "이미 취소된 결제 입니다.", "The payment has already been canceled."},
    {"ALREADY_PROCESSED_PAYMENT", 400, "이미 처리된 결제 입니다.", "The payment has already been processed."},
    /* [ours] wording: Toss reports this code for a confirm of a payment still being processed. */
    {"ALREADY_PROCESSING_REQUEST", 400, "이미 처리 중인 요청이 있습니다.", "A request for this payment is already being processed."},
    {"BELOW_MINIMUM_AMOUNT", 400, "신용카드는 결제금액이 100원 이상, 계좌는 200원이상부터 결제가 가능합니다.", "Card payments require at least 100 KRW, account payments at least 200 KRW."},
    {"CARD_PROCESSING_ERROR", 400, "카드사에서 오류가 발생했습니다.", "The card company reported an error."},
    {"COMMON_ERROR", 500, "일시적인 오류가 발생했습니다. 잠시 후 다시 시도해주세요.", "A temporary error occurred. Please try again later."},
    {"DUPLICATED_ORDER_ID", 400, "이미 승인 및 취소가 진행된 중복된 주문번호 입니다. 다른 주문번호로 진행해주세요.", "This orderId has already been used for an approval or a cancel. Use another orderId."},
    {"EXCEED_MAX_DAILY_PAYMENT_COUNT", 400, "하루 결제 가능 횟수를 초과했습니다.", "The daily payment count limit has been exceeded."},
    {"EXCEED_MAX_DUE_DATE", 400, "가상 계좌의 최대 유효만료 기간을 초과했습니다.", "The virtual account's due date exceeds the maximum allowed."},
    {"EXCEED_MAX_PAYMENT_AMOUNT", 400, "하루 결제 가능 금액을 초과했습니다.", "The daily payment amount limit has been exceeded."},
    {"FAILED_INTERNAL_SYSTEM_PROCESSING", 500, "내부 시스템 처리 작업이 실패했습니다. 잠시 후 다시 시도해주세요.", "Internal system processing failed. Please try again later."},
    {"FAILED_PAYMENT_INTERNAL_SYSTEM_PROCESSING", 500, "결제가 완료되지 않았어요. 다시 시도해주세요.", "The payment was not completed. Please try again."},
    {"FDS_ERROR", 403, "[토스페이먼츠] 위험거래가 감지되어 결제가 제한됩니다. 발송된 문자에 포함된 링크를 통해 본인인증 후 결제가 가능합니다. (고객센터: 1644-8051)", "A risky transaction was detected and the payment is restricted."},
    {"FORBIDDEN_CONSECUTIVE_REQUEST", 403, "반복적인 요청은 허용되지 않습니다. 잠시 후 다시 시도해주세요.", "Consecutive requests are not allowed. Please try again later."},
    {"FORBIDDEN_REQUEST", 403, "허용되지 않은 요청입니다.", "The request is not allowed."},
    {"IDEMPOTENCY_KEY_REUSED", 422, "같은 멱등키로 다른 요청 본문이 전송되었습니다.", "The Idempotency-Key was reused with a different request body."}, /* [ours] */
    {"IDEMPOTENT_REQUEST_PROCESSING", 409, "이전 멱등 요청이 처리중입니다.", "The previous idempotent request is still being processed."},
    /* Toss's docs list 403 for this code; other sources report 400. docs/api.md §2 uses 400. */
    {"INCORRECT_BASIC_AUTH_FORMAT", 400, "잘못된 요청입니다. ':' 를 포함해 인코딩해주세요.", "Invalid request. Encode the key followed by ':'."},
    {"INVALID_API_KEY", 400, "잘못된 시크릿키 연동 정보 입니다.", "Invalid secret key integration information."},
    {"INVALID_BANK", 400, "유효하지 않은 은행입니다.", "Invalid bank."},
    {"INVALID_CARD_EXPIRATION", 400, "카드 정보를 다시 확인해주세요. (유효기간)", "Please check the card information again (expiration date)."},
    {"INVALID_CARD_NUMBER", 400, "카드번호를 다시 확인해주세요.", "Please check the card number again."},
    {"INVALID_IDEMPOTENCY_KEY", 400, "멱등키는 300자 이하여야 합니다.", "The Idempotency-Key must be at most 300 characters."},
    {"INVALID_ORDER_ID", 400, "주문번호는 6자 이상 64자 이하의 영문 대소문자, 숫자, 특수문자 -, _ 로만 이루어져야 합니다.", "orderId must be 6 to 64 characters of letters, digits, '-' and '_'."}, /* [ours] wording */
    {"INVALID_PAYMENT_KEY", 400, "잘못된 paymentKey 입니다.", "Invalid paymentKey."}, /* [ours] wording */
    {"INVALID_PROFILE", 400, "잘못된 프로필입니다.", "Invalid profile."}, /* [ours] admin */
    /* Toss's message speaks of a mismatch; fakegate sends it for a missing or invalid account. */
    {"INVALID_REFUND_ACCOUNT_INFO", 400, "환불 계좌번호와 예금주명이 일치하지 않습니다.", "The refund account number and holder name do not match."},
    {"INVALID_REQUEST", 400, "잘못된 요청입니다.", "Invalid request."},
    {"INVALID_STOPPED_CARD", 400, "정지된 카드 입니다.", "The card has been suspended."},
    {"INVALID_TEST_CODE", 400, "유효하지 않은 테스트 코드입니다.", "Invalid test code."}, /* [ours] wording */
    {"INVALID_TRANSACTION_KEY", 400, "잘못된 transactionKey 입니다.", "Invalid transactionKey."}, /* [ours] */
    {"INVALID_VALID_HOURS_WITH_DUE_DATE_AND_SINGLE", 400, "유효 시간과 마감 시간은 동시에 설정할 수 없습니다.", "validHours and dueDate cannot both be set."}, /* [ours] wording */
    {"METHOD_NOT_ALLOWED", 405, "허용되지 않은 메서드입니다.", "Method not allowed."}, /* [ours] */
    {"NOT_ALLOWED_PARTIAL_REFUND_WAITING_DEPOSIT", 403, "입금 대기중인 결제는 부분 환불이 불가합니다.", "A payment waiting for its deposit cannot be partially refunded."},
    {"NOT_AVAILABLE_PAYMENT", 400, "결제가 불가능한 시간대입니다", "Payments are not available at this time."},
    {"NOT_CANCELABLE_AMOUNT", 403, "취소 할 수 없는 금액 입니다.", "The amount cannot be canceled."},
    {"NOT_CANCELABLE_PAYMENT", 403, "취소 할 수 없는 결제 입니다.", "The payment cannot be canceled."},
    {"NOT_FOUND", 404, "존재하지 않는 정보 입니다.", "Not found."},
    {"NOT_FOUND_PAYMENT", 404, "존재하지 않는 결제 정보 입니다.", "The payment does not exist."},
    {"NOT_FOUND_PAYMENT_SESSION", 404, "결제 시간이 만료되어 결제 진행 데이터가 존재하지 않습니다.", "The payment session has expired and its data no longer exists."},
    {"NOT_MATCHES_REFUNDABLE_AMOUNT", 400, "잔액 결과가 일치하지 않습니다.", "The refundable amount does not match the balance."},
    {"PROVIDER_ERROR", 400, "일시적인 오류가 발생했습니다. 잠시 후 다시 시도해주세요.", "A temporary error occurred. Please try again later."},
    {"REJECT_CARD_COMPANY", 403, "결제 승인이 거절되었습니다.", "The payment approval was rejected."},
    {"REJECT_CARD_PAYMENT", 403, "한도초과 혹은 잔액부족으로 결제에 실패했습니다.", "The payment failed: limit exceeded or insufficient balance."},
    {"REQUEST_HEADER_FIELDS_TOO_LARGE", 431, "요청 헤더가 너무 큽니다.", "Request header fields too large."}, /* [ours] */
    {"SERVICE_UNAVAILABLE", 503, "일시적으로 서비스를 이용할 수 없습니다. 잠시 후 다시 시도해주세요.", "The service is temporarily unavailable. Please try again later."}, /* [ours] */
    {"TOO_MANY_REQUESTS", 429, "요청이 너무 많습니다. 잠시 후 다시 시도해주세요.", "Too many requests. Please try again later."}, /* [ours] */
    {"UNAPPROVED_ORDER_ID", 400, "아직 승인되지 않은 주문번호입니다.", "The orderId has not been approved yet."},
    {"UNAUTHORIZED", 401, "인증되지 않은 요청입니다.", "Unauthorized."}, /* [ours] admin token */
    {"UNAUTHORIZED_KEY", 401, "인증되지 않은 시크릿 키 혹은 클라이언트 키 입니다.", "Unauthorized secret key or client key."},
    {"UNKNOWN_PAYMENT_ERROR", 500, "결제에 실패했어요. 같은 문제가 반복된다면 은행이나 카드사로 문의해주세요.", "The payment failed. If this keeps happening, contact your bank or card company."},
};

static int cmp(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const struct toss_error *)elem)->code);
}

const struct toss_error *toss_error_find(const char *code)
{
    return bsearch(code, table, sizeof table / sizeof table[0], sizeof table[0], cmp);
}

const struct toss_error *toss_error_table(size_t *n)
{
    *n = sizeof table / sizeof table[0];
    return table;
}
